package integration

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// Each package prefixes its errors once, where they leave it (its boundary.go). These tests
// look at errors that cross from one package into another: each prefix once, and the outer
// package's first.

func init() {
	beam.RegisterType(reflect.TypeOf(prefixFormElem{}))
	register.Function1x1(prefixRecord)
}

// countPrefixes returns how often each package prefix occurs in text ("known formats: ...",
// which lists the formats, is not a prefix).
func countPrefixes(text string) map[string]int {
	n := map[string]int{}
	for _, p := range []string{"cloudtasksio: ", "formats: ", "deadletter: ", "pubsubdl: "} {
		if c := strings.Count(text, p); c > 0 {
			n[p] = c
		}
	}
	if c := strings.Count(text, "known formats: "); c > 0 {
		n["formats: "] -= c
		if n["formats: "] == 0 {
			delete(n, "formats: ")
		}
	}
	return n
}

// prefixOrder has a metadata field of the wrong type when Bad is set, and a body field csv
// cannot write.
type prefixOrder struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

type prefixBadTag struct {
	ID   string `json:"id"`
	When int64  `cloudtasks:"schedule-time"`
}

// TestConstructionErrorsOfTheFormatsCarryEachPrefixOnce: an error of the body formats that
// cloudtasksio reports at construction names both packages once, cloudtasksio first.
func TestConstructionErrorsOfTheFormatsCarryEachPrefixOnce(t *testing.T) {
	queue := cloudtasksio.Queue{Project: "p", Location: "l", Name: "q"}
	for _, c := range []struct {
		name string
		body formats.Format
		elem any
	}{
		{"an element type the format cannot encode", formats.CSV(), prefixOrder{}},
		{"a metadata field of the wrong type", formats.JSON(), prefixBadTag{}},
		{"a bad option value", formats.CSV().With(formats.OptionCSVFieldDelimiter, "ab"), prefixOrder{}},
		{"an unknown format", formats.Format{Name: "xml"}, prefixOrder{}},
		{"an avro schema that does not parse", formats.Avro("{"), prefixOrder{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			cfg := cloudtasksio.Config{Queue: queue, HTTP: &cloudtasksio.HTTPTarget{URL: fmtURL, Body: c.body}}
			_, err := cloudtasksio.TryWrite(s, cfg, beam.Create(s, c.elem))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "cloudtasksio: "), err.Error())
			assert.Equal(t, map[string]int{"cloudtasksio: ": 1, "formats: ": 1}, countPrefixes(err.Error()), err.Error())
		})
	}
	t.Run("an option key of the format", func(t *testing.T) {
		_, err := cloudtasksio.ConfigFromOptions(map[string]string{"project": "p", "location": "l", "queue": "q",
			"http.url": fmtURL, "format": "csv", "csv.field-delimiter": "ab"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "csv.field-delimiter", "the error is about the format's option")
		assert.True(t, strings.HasPrefix(err.Error(), "cloudtasksio: "), err.Error())
		assert.Equal(t, 1, countPrefixes(err.Error())["cloudtasksio: "], err.Error())
		assert.LessOrEqual(t, countPrefixes(err.Error())["formats: "], 1, err.Error())
	})
}

// TestToPubSubAnswersWithPubsubdlsPrefixOnly: deadletter.TryToPubSub passes on the error of
// the output pubsubdl installs, which pubsubdl prefixed, without a second package's prefix.
func TestToPubSubAnswersWithPubsubdlsPrefixOnly(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	err := deadletter.TryToPubSub(s, deadletter.PubSubConfig{Topic: "dead-letters"}, beam.Create(s, deadletter.FailedElement{}))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "pubsubdl: "), err.Error())
	assert.Equal(t, map[string]int{"pubsubdl: ": 1}, countPrefixes(err.Error()), err.Error())
}

// prefixFormElem has a form field whose nil entry fails the element at run time.
type prefixFormElem struct {
	Tags []*string `json:"tags"`
}

var prefixDeadLetters sync.Map

func prefixRecord(fe deadletter.FailedElement) int {
	prefixDeadLetters.Store(fe.Code, fe)
	return 0
}

// TestADeadLetterOfAnEncoderCarriesTheFormatsPrefixOnce: an element the body format cannot
// encode becomes a dead letter whose Error is the encoder's error, with the formats prefix once
// and no cloudtasksio prefix (a dead letter's Error is a reason, not an error of the sink).
func TestADeadLetterOfAnEncoderCarriesTheFormatsPrefixOnce(t *testing.T) {
	needsCloudtaskstest(t, "WithoutDispatch")
	b := newBackend(t, cloudtaskstest.WithoutDispatch())
	q := b.newQueue(t, nil)
	p, s := beam.NewPipelineWithRoot()
	dl := cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr, OnFailure: cloudtasksio.DeadLetter,
		HTTP: &cloudtasksio.HTTPTarget{URL: fmtURL, Body: formats.FormURLEncoded()}},
		beam.Create(s, prefixFormElem{Tags: []*string{nil}}))
	beam.ParDo(s, prefixRecord, dl)
	require.NoError(t, ptest.Run(p))
	v, ok := prefixDeadLetters.Load(cloudtasksio.CodeSerialization)
	require.True(t, ok, "the element was dead-lettered")
	fe := v.(deadletter.FailedElement)
	assert.Contains(t, fe.Error, "field Tags")
	assert.Equal(t, map[string]int{"formats: ": 1}, countPrefixes(fe.Error), fe.Error)
}
