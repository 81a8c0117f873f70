package engines

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeGCS is a loopback stand-in for the Cloud Storage JSON API, as much of it as the Go SDK's
// Dataflow runner uses while it translates a job: reading a bucket's attributes and uploading
// objects (multipart and resumable uploads). Clients reach it through STORAGE_EMULATOR_HOST,
// which the Cloud Storage Go client honours with no credentials. It keeps the names and sizes
// of the objects written, not their bytes.
type fakeGCS struct {
	// Host is the "host:port" for STORAGE_EMULATOR_HOST.
	Host string

	mu         sync.Mutex
	objects    map[string]int64 // "gs://bucket/name" -> size
	uploads    map[string]*pendingUpload
	unexpected []string // requests it does not serve
}

// pendingUpload is a resumable upload not yet finished.
type pendingUpload struct {
	bucket, name string
	size         int64
	sums         checksums
}

// checksums are the CRC32C and MD5 of an object's bytes, which the fake answers with as Cloud
// Storage does: the Python client checks the CRC32C of a resumable upload.
type checksums struct {
	crc hash.Hash32
	md5 hash.Hash
}

func newChecksums() checksums {
	return checksums{crc: crc32.New(crc32.MakeTable(crc32.Castagnoli)), md5: md5.New()}
}

// Write adds bytes to both sums.
func (c checksums) Write(p []byte) (int, error) {
	c.crc.Write(p)
	return c.md5.Write(p)
}

// newFakeGCS starts a fakeGCS, closed when tb ends.
func newFakeGCS(tb testing.TB) *fakeGCS {
	tb.Helper()
	g := &fakeGCS{objects: map[string]int64{}, uploads: map[string]*pendingUpload{}}
	srv := httptest.NewServer(http.HandlerFunc(g.serve))
	tb.Cleanup(srv.Close)
	g.Host = strings.TrimPrefix(srv.URL, "http://")
	return g
}

// Objects returns the objects written so far: "gs://bucket/name" -> size.
func (g *fakeGCS) Objects() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int64{}
	for k, v := range g.objects {
		out[k] = v
	}
	return out
}

// Unexpected returns the requests the fake did not serve, as "METHOD path".
func (g *fakeGCS) Unexpected() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.unexpected...)
}

var (
	bucketPath = regexp.MustCompile(`^/storage/v1/b/([^/]+)$`)
	uploadPath = regexp.MustCompile(`^/upload/storage/v1/b/([^/]+)/o$`)
)

func (g *fakeGCS) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch m := bucketPath.FindStringSubmatch(r.URL.Path); {
	case m != nil && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"kind": "storage#bucket", "name": m[1], "id": m[1]})
		return
	}
	m := uploadPath.FindStringSubmatch(r.URL.Path)
	switch {
	case m != nil && (r.Method == http.MethodPut || r.Method == http.MethodPost) && q.Get("upload_id") != "":
		// The chunks of a resumable upload, sent to the session URL (the client uses POST).
		g.resumableChunk(w, r, q.Get("upload_id"))
	case m != nil && r.Method == http.MethodPost && q.Get("uploadType") == "multipart":
		g.multipart(w, r, m[1])
	case m != nil && r.Method == http.MethodPost && q.Get("uploadType") == "resumable":
		var meta struct{ Name string }
		_ = json.NewDecoder(r.Body).Decode(&meta)
		if meta.Name == "" {
			meta.Name = q.Get("name")
		}
		g.mu.Lock()
		id := strconv.Itoa(len(g.uploads) + len(g.objects) + 1)
		g.uploads[id] = &pendingUpload{bucket: m[1], name: meta.Name, sums: newChecksums()}
		g.mu.Unlock()
		w.Header().Set("Location", fmt.Sprintf("http://%s%s?uploadType=resumable&upload_id=%s", r.Host, r.URL.Path, id))
		w.WriteHeader(http.StatusOK)
	default:
		g.mu.Lock()
		g.unexpected = append(g.unexpected, r.Method+" "+r.URL.Path)
		g.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": 404, "message": "not served by the test's fake Cloud Storage"}})
	}
}

// multipart stores a one-request upload: a JSON metadata part, then the content.
func (g *fakeGCS) multipart(w http.ResponseWriter, r *http.Request, bucket string) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	part, err := mr.NextPart()
	var meta struct{ Name string }
	if err == nil {
		err = json.NewDecoder(part).Decode(&meta)
	}
	var size int64
	sums := newChecksums()
	if err == nil {
		if part, err = mr.NextPart(); err == nil {
			size, err = io.Copy(sums, part)
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.store(w, bucket, meta.Name, size, sums)
}

// resumableChunk takes one chunk of a resumable upload; the last one (its Content-Range names
// the total) stores the object.
func (g *fakeGCS) resumableChunk(w http.ResponseWriter, r *http.Request, id string) {
	g.mu.Lock()
	u := g.uploads[id]
	g.mu.Unlock()
	if u == nil {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	// A client sends the chunks of one upload one after the other.
	n, err := io.Copy(u.sums, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	u.size += n
	g.mu.Unlock()
	if cr := r.Header.Get("Content-Range"); strings.HasSuffix(cr, "/*") {
		// "Send the next chunk": status 308, or, for a client that asks for it (Google's Go
		// clients do), 200 with the 308 in a header.
		w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", u.size-1))
		if r.Header.Get("X-GUploader-No-308") == "yes" {
			w.Header().Set("X-Http-Status-Code-Override", "308")
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusPermanentRedirect)
		return
	}
	g.mu.Lock()
	delete(g.uploads, id)
	g.mu.Unlock()
	g.store(w, u.bucket, u.name, u.size, u.sums)
}

func (g *fakeGCS) store(w http.ResponseWriter, bucket, name string, size int64, sums checksums) {
	g.mu.Lock()
	g.objects["gs://"+bucket+"/"+name] = size
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"kind": "storage#object", "bucket": bucket, "name": name, "size": strconv.FormatInt(size, 10),
		"crc32c":  base64.StdEncoding.EncodeToString(sums.crc.Sum(nil)),
		"md5Hash": base64.StdEncoding.EncodeToString(sums.md5.Sum(nil))})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
