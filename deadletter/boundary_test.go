package deadletter

import (
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary/boundarytest"
)

// TestNoHandWrittenPackagePrefixOutsideTheBoundary keeps the package prefix in boundary.go.
func TestNoHandWrittenPackagePrefixOutsideTheBoundary(t *testing.T) {
	boundarytest.Parse(t, 4).NoHandWrittenPrefix(t, string(pkgPrefix), true)
}

// TestExportedFunctionsReturnTheirErrorsThroughTheBoundary checks that every exported
// function or method returning an error returns it through withPrefix, but TryToPubSub, which
// hands on pubsubdl's errors as they are.
func TestExportedFunctionsReturnTheirErrorsThroughTheBoundary(t *testing.T) {
	checked := boundarytest.Parse(t, 4).ExportedReturnThroughTheBoundary(t, map[string]bool{"TryToPubSub": true})
	for _, name := range []string{"NewElementEncoder", "ElementEncoder.Encode", "EncodeElement", "DecodeElement", "DecodeElementAs"} {
		assert.True(t, checked[name], "%s was not found: the check saw no such function", name)
	}
}

// assertPrefixedOnce checks that err starts with the package prefix and carries it once.
func assertPrefixedOnce(t *testing.T, err error, what string) {
	t.Helper()
	boundarytest.PrefixedOnce(t, err, string(pkgPrefix), what)
}

// TestErrorsLeaveWithThePrefixOnce drives each exported function into its failures and checks
// the error a caller gets: the prefix once, at its start, with the sentinels still reachable.
func TestErrorsLeaveWithThePrefixOnce(t *testing.T) {
	_, err := NewElementEncoder(nil)
	assertPrefixedOnce(t, err, "NewElementEncoder(nil)")
	_, err = NewElementEncoder(reflect.TypeFor[chan int]())
	assertPrefixedOnce(t, err, "NewElementEncoder of a type without coder")
	assert.True(t, strings.HasPrefix(err.Error(), "deadletter: Beam has no coder for element type chan int: "), err.Error())
	_, _, err = EncodeElement(make(chan int))
	assertPrefixedOnce(t, err, "EncodeElement of a type without coder")

	enc, err := NewElementEncoder(reflect.TypeFor[string]())
	require.NoError(t, err)
	_, err = enc.Encode(42)
	assertPrefixedOnce(t, err, "Encode of an element of another type")

	_, err = DecodeElement[string](FailedElement{})
	assertPrefixedOnce(t, err, "DecodeElement of a dead letter without element")
	assert.ErrorIs(t, err, ErrNoElement)
	b, name, err := EncodeElement("x")
	require.NoError(t, err)
	_, err = DecodeElement[int](FailedElement{Element: b, ElementType: name})
	assertPrefixedOnce(t, err, "DecodeElement as another type")
	assert.ErrorIs(t, err, ErrElementType)
	_, err = DecodeElement[string](FailedElement{Element: append(b, 'x')})
	assertPrefixedOnce(t, err, "DecodeElement of bytes left over")
	_, err = DecodeElementAs(FailedElement{Element: b}, nil)
	assertPrefixedOnce(t, err, "DecodeElementAs(nil)")

	// This test binary does not link deadletter/pubsubdl. The error names deadletter.ToPubSub
	// in place of the prefix, as it did before the boundary.
	_, s := beam.NewPipelineWithRoot()
	err = TryToPubSub(s, PubSubConfig{Topic: "projects/p/topics/t"}, beam.Create(s, FailedElement{}))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "deadletter.ToPubSub: the Pub/Sub output is in package "), err.Error())
	assert.NotContains(t, err.Error(), string(pkgPrefix))
}
