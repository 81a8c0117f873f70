package kafkatemplate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A task id whose JSON text decoding would change (an invalid byte sequence, an unpaired
// surrogate escape) is the record's failure: decoded, several such ids would become the same
// string, the same task name, and all but the first record would be counted as deduplicated
// without a task.
func TestATaskIDThatDoesNotDecodeLosslesslyIsRejected(t *testing.T) {
	spec := &recordSpec{JSON: true, TaskIDField: "id"}
	for _, value := range []string{
		`{"id":"a` + "\xff" + `"}`,
		`{"id":"a` + "\xfe" + `"}`,
		`{"id":"\ud800"}`,
		`{"id":"\udbff"}`,
		`{"id":"\udc00x"}`,
		`{"id":"x\ud800\u0041"}`,
		`{"id":"x\ud800"}`,
	} {
		_, err := spec.read(Record{Value: []byte(value)})
		require.Error(t, err, "%q", value)
		assert.Contains(t, err.Error(), `task id field "id" is not valid UTF-8 text`)
		assert.NotContains(t, err.Error(), "d800", "the value is not repeated")
	}
	for value, want := range map[string]string{
		`{"id":"order-1"}`:          "order-1",
		`{"id":"caf\u00e9"}`:        "café",
		`{"id":"\ud83d\ude00"}`:     "😀",
		`{"id":"😀 ok"}`:             "😀 ok",
		`{"id":"back\\u0041slash"}`: `back\u0041slash`,
		`{"id":"\ufffd is a char"}`: "\uFFFD is a char",
		`{"id":42}`:                 "42",
	} {
		rec, err := spec.read(Record{Value: []byte(value)})
		require.NoError(t, err, "%q", value)
		assert.Equal(t, want, rec.key, "%q", value)
	}
}

// A null in a JSON-object flag (headers, consumer properties) is an error naming the entry,
// not an empty value set without a word; the error never repeats a value.
func TestAJSONObjectFlagRefusesANullValue(t *testing.T) {
	_, err := parseJSONObject(`{"X-Api-Key":null,"X-Other":"s3cret"}`)
	require.Error(t, err)
	assert.Equal(t, `the value of "X-Api-Key" is null; it must be a string, a number or a boolean`, err.Error())

	got, err := parseJSONObject(`{"a":"null","b":1,"c":true}`)
	require.NoError(t, err)
	assert.Equal(t, [][2]string{{"a", "null"}, {"b", "1"}, {"c", "true"}}, got, "the string \"null\" is a value like any other")
}
