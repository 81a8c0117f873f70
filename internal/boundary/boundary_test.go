package boundary

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

const p Prefix = "pkg: "

func TestWrapAddsThePrefixOnceAndKeepsTheChain(t *testing.T) {
	err := p.Wrap(fmt.Errorf("reading: %w", io.EOF))
	assert.EqualError(t, err, "pkg: reading: EOF")
	assert.ErrorIs(t, err, io.EOF)
	assert.EqualError(t, p.Wrap(err), "pkg: reading: EOF", "an error that crossed the boundary is not prefixed again")
	assert.EqualError(t, p.Wrap(errors.New("pkg: built with it")), "pkg: built with it")
	assert.EqualError(t, Prefix("other: ").Wrap(err), "other: pkg: reading: EOF", "another package's prefix is its own")
	assert.NoError(t, p.Wrap(nil))
}

func TestTextAddsThePrefix(t *testing.T) {
	assert.Equal(t, "pkg: worker w1 started", p.Text("worker w1 started"))
}
