package bodyformat

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// TestABodyStringThatIsNotUTF8 pins the table of formats.md ("Text that is not UTF-8"): no
// format fails an element for it, and each sends what the page says.
func TestABodyStringThatIsNotUTF8(t *testing.T) {
	type order struct {
		Note string `json:"note"`
	}
	elem := order{Note: "a\xffb"}
	cases := []struct {
		format formats.Format
		want   string
	}{
		{formats.JSON(), `{"note":"a\ufffdb"}`}, // the escape, written out by encoding/json
		{formats.FormURLEncoded(), "note=a%FFb"},
		{formats.CSV(), "a\xffb"},
		{formats.Raw(), "a\xffb"},
	}
	for _, c := range cases {
		t.Run(c.format.Name, func(t *testing.T) {
			assert.Equal(t, c.want, encodeString(t, encoderFor[order](t, c.format), elem))
		})
	}
}
