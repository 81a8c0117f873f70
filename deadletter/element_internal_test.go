package deadletter

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A sink keeps one ElementEncoder per DoFn instance for its life; one huge element must not
// leave its buffer behind, while the buffer of ordinary elements is reused.
func TestTheElementEncoderDoesNotKeepALargeElementsBuffer(t *testing.T) {
	enc, err := NewElementEncoder(reflect.TypeFor[[]byte]())
	require.NoError(t, err)

	small := bytes.Repeat([]byte("s"), 1000)
	out, err := enc.Encode(small)
	require.NoError(t, err)
	assert.Greater(t, len(out), len(small))
	kept := enc.buf.Cap()
	assert.Positive(t, kept, "an ordinary element's buffer is kept for the next one")

	huge := bytes.Repeat([]byte("h"), 8<<20)
	out, err = enc.Encode(huge)
	require.NoError(t, err)
	assert.Greater(t, len(out), len(huge), "the huge element is encoded whole")
	assert.LessOrEqual(t, enc.buf.Cap(), maxKeptBuffer, "the huge element's buffer is not kept")

	out, err = enc.Encode(small)
	require.NoError(t, err)
	assert.Greater(t, len(out), len(small))
	assert.LessOrEqual(t, enc.buf.Cap(), maxKeptBuffer)
}
