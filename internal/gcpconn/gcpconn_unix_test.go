//go:build unix

package gcpconn

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAKeyFileThatIsAFIFOIsRefusedWithoutBlocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.json")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	// Should the loader open the FIFO (the defect), a writer releases it at once, so the test
	// fails instead of hanging. Once the loader refuses the FIFO unopened, the writer waits for
	// a reader: the cleanup opens the read end without blocking to let it go.
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	}()
	t.Cleanup(func() {
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-writerDone
			r.Close()
		}
	})

	_, err := LoadServiceAccountKey(path, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
	assert.NotContains(t, err.Error(), path)
}
