// Package gcpconn holds the connection rules shared by the project's Google Cloud clients
// (the Cloud Tasks sink and the dead-letter publisher): the emulator endpoint syntax, the
// plaintext emulator transport and strict loading of a service-account key file; the emulator
// and credential rules and the client options they build (Connection); the client settings
// and their checks (ClientSettings); and the per-process cache (Cache) of the shared clients
// and of what the first-use checks found, which makes one read per key at a time and remembers
// a failure for FailureTTL.
package gcpconn

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// CheckEndpoint accepts an emulator endpoint of the form host:port, as net.SplitHostPort
// splits it (so an IPv6 host is bracketed: "[::1]:8080"; an unbracketed "::1:8080" is
// ambiguous and no client can dial it). It must contain no whitespace or control character,
// no scheme and no user info, the host must be non-empty, contain no '/' and be a valid DNS
// length (at most 253 bytes, labels of at most 63), and the port must be a decimal number in
// 1..65535. The error quotes the endpoint cut short (boundedtext.Quote), and never the user
// info part of one given as "user:token@host:port", and says what is wrong.
func CheckEndpoint(endpoint string) error {
	shown := endpoint
	if at := strings.LastIndexByte(endpoint, '@'); at >= 0 {
		// Whatever stands before the '@' may be a password or a token: never repeat it.
		shown = "<user info removed>@" + endpoint[at+1:]
	}
	// A path, query or fragment may carry a token or an API key (?key=...): never repeat it
	// either. It starts at the first '/', '?' or '#' after the scheme's "://", if any.
	from := 0
	if i := strings.Index(shown, "://"); i >= 0 && !strings.ContainsAny(shown[:i], "/?#") {
		from = i + len("://") // a leading scheme's, not one inside a query or fragment
	}
	if cut := strings.IndexAny(shown[from:], "/?#"); cut >= 0 {
		shown = shown[:from+cut] + "<path, query or fragment removed>"
	}
	bad := func(why string) error { return fmt.Errorf("%s is not host:port: %s", boundedtext.Quote(shown), why) }
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, "/:@[") {
		hint := "drop the scheme: the endpoint is host:port only"
		if rest != "" && !strings.ContainsAny(rest, "@/?#") && len(rest) <= boundedtext.MaxEcho {
			hint += ", here " + strconv.Quote(rest)
		}
		return bad(hint)
	}
	if strings.Contains(endpoint, "@") {
		return bad("user info (user:password@) is not allowed; give host:port only")
	}
	if strings.IndexFunc(endpoint, unicode.IsSpace) >= 0 {
		return bad("it contains whitespace")
	}
	if strings.IndexFunc(endpoint, unicode.IsControl) >= 0 {
		return bad("it contains a control character")
	}
	if !strings.Contains(endpoint, ":") {
		return bad("there is no ':'")
	}
	host, portText, err := net.SplitHostPort(endpoint)
	switch {
	case err != nil && !strings.HasPrefix(endpoint, "[") && strings.Count(endpoint, ":") > 1:
		return bad("a host with ':' (an IPv6 address) must be bracketed, as in [::1]:8080")
	case err != nil:
		return bad("the host is not a name or a bracketed IPv6 address")
	case host == "":
		return bad("the host is empty")
	case strings.Contains(host, "/"):
		return bad("the host contains '/'")
	case !isIPAddr(host) && strings.IndexFunc(host, func(r rune) bool { return !isHostChar(r) }) >= 0:
		return bad("the host may hold only letters, digits, '-', '.' and '_'")
	case len(host) > MaxHostBytes:
		return bad(fmt.Sprintf("the host is %d bytes long; a host name has at most %d", len(host), MaxHostBytes))
	case !isIPAddr(host) && longLabel(host):
		return bad(fmt.Sprintf("a label of the host (a part between dots) is over %d bytes", maxLabelBytes))
	}
	if portText == "" || len(portText) > 5 || strings.TrimLeft(portText, "0123456789") != "" {
		return bad("the port is not a number in 1..65535")
	}
	if port, _ := strconv.Atoi(portText); port < 1 || port > 65535 {
		return bad("the port is not a number in 1..65535")
	}
	return nil
}

// MaxHostBytes is the longest host name DNS allows (RFC 1035): 253 bytes.
const MaxHostBytes = 253

// maxLabelBytes is the longest label of a host name (RFC 1035): 63 bytes.
const maxLabelBytes = 63

// longLabel reports whether a dot-separated label of host is over maxLabelBytes.
func longLabel(host string) bool {
	for label := range strings.SplitSeq(host, ".") {
		if len(label) > maxLabelBytes {
			return true
		}
	}
	return false
}

// EmulatorOptions are the client options for an emulator at endpoint: a plaintext connection
// that carries no credentials at all, because a token must never travel unencrypted.
func EmulatorOptions(endpoint string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(endpoint),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// MaxKeyFileBytes is the largest key file LoadServiceAccountKey reads: 64 KiB, many times the
// size of a service-account key.
const MaxKeyFileBytes = 64 << 10

// LoadServiceAccountKey reads a service-account JSON key and refuses every other credential
// type (user credentials, external accounts, impersonation configurations). Its errors say
// what went wrong in a fixed sentence and deliberately carry neither the path nor anything
// read from the file nor the parser's own message, any of which could put key material in
// job logs. Callers prefix them with the setting's name.
//
// Only a regular file of at most MaxKeyFileBytes is read: a FIFO or device would block the
// read (or never end), and a service-account key is a few kilobytes, so anything larger is
// not one and is not read into memory.
func LoadServiceAccountKey(path string, scopes []string) (*auth.Credentials, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &head) != nil {
		return nil, errors.New("the file is not a JSON key")
	}
	if head.Type != string(credentials.ServiceAccount) {
		return nil, errors.New(`the file is not a service-account key (its "type" is not "service_account")`)
	}
	creds, err := credentials.NewCredentialsFromJSON(credentials.ServiceAccount, data, &credentials.DetectOptions{Scopes: scopes})
	if err != nil {
		return nil, errors.New("the service-account key could not be parsed")
	}
	return creds, nil
}

// readKeyFile reads a regular file of at most MaxKeyFileBytes. The file is checked before it
// is opened (opening a FIFO blocks until a writer comes) and again through the opened
// descriptor, so a file swapped in between is refused too.
func readKeyFile(path string) ([]byte, error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, fileError(err)
	}
	if err := checkKeyFileInfo(before); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, fileError(err)
	}
	if !os.SameFile(before, opened) {
		return nil, errors.New("the file changed while it was being opened")
	}
	if err := checkKeyFileInfo(opened); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxKeyFileBytes+1))
	if err != nil {
		return nil, fileError(err)
	}
	if len(data) > MaxKeyFileBytes {
		return nil, errors.New(tooLarge)
	}
	return data, nil
}

var tooLarge = fmt.Sprintf("the file is larger than %d bytes, too large for a service-account key", MaxKeyFileBytes)

func checkKeyFileInfo(info fs.FileInfo) error {
	switch {
	case !info.Mode().IsRegular():
		return errors.New("the file is not a regular file (a directory, FIFO, socket or device cannot hold a key)")
	case info.Size() > MaxKeyFileBytes:
		return errors.New(tooLarge)
	}
	return nil
}

// fileError turns a file system error into a fixed sentence without the path.
func fileError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("the file does not exist on this worker")
	case errors.Is(err, fs.ErrPermission):
		return errors.New("the file is not readable by this worker")
	}
	return errors.New("the file could not be read")
}

// isHostChar reports whether r may appear in a host name an endpoint gives (underscores
// included, as container and compose service names use them).
func isHostChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_'
}

// isIPAddr reports whether host is an IP address, an IPv6 one with a zone ("fe80::1%eth0")
// included.
func isIPAddr(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}
