package bodyformat

import (
	"encoding/csv"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// fuzzForm has names that need escaping themselves.
type fuzzForm struct {
	A string   `json:"a"`
	B []string `json:"n&m=[]% é+"`
	C *string  `json:"c.d"`
	U string   `cloudtasks:"url"`
}

func FuzzFormEncode(f *testing.F) {
	f.Add("東京 + pickup", "urgent", "gift", "books,sale", true)
	f.Add("", "", "a=1&b=2", "%zz", false)
	f.Add("*-._~", "\x00\xff", " ", "+", true)
	enc, err := NewEncoder(formats.FormURLEncoded(), mustSchema[fuzzForm]())
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, a, b1, b2, c string, hasC bool) {
		elem := fuzzForm{A: a, B: []string{b1, b2}, U: "https://not-in-body.test"}
		want := url.Values{"a": {a}, "n&m=[]% é+": {b1, b2}}
		if hasC {
			elem.C = &c
			want["c.d"] = []string{c}
		}
		body, err := enc.Encode(elem)
		require.NoError(t, err)
		for i := 0; i < len(body); i++ {
			ch := body[i]
			switch {
			case formUnreserved(ch), ch == '+', ch == '&', ch == '=':
			case ch == '%':
				require.Less(t, i+2, len(body), "truncated escape in %q", body)
				require.True(t, isUpperHex(body[i+1]) && isUpperHex(body[i+2]), "escape not uppercase hex in %q", body)
				i += 2
			default:
				t.Fatalf("byte %q left unescaped in %q", ch, body)
			}
		}
		got, err := url.ParseQuery(string(body))
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

type fuzzCSV struct {
	A string `json:"a"`
	B string `json:"b"`
	C string `json:"c"`
}

func FuzzCSVRoundTrip(f *testing.F) {
	f.Add("a", "b,c", `say "hi"`, uint8(0))
	f.Add("", "NULL", "x\ny", uint8(1))
	f.Add(" lead", "tab\there", "ü", uint8(2))
	delimiters := []rune{',', ';', '\t', '|'}
	f.Fuzz(func(t *testing.T, a, b, c string, d uint8) {
		delim := delimiters[int(d)%len(delimiters)]
		format := formats.CSV().With(formats.OptionCSVFieldDelimiter, string(delim)).With(formats.OptionCSVNullLiteral, "NULL")
		enc, err := NewEncoder(format, mustSchema[fuzzCSV]())
		require.NoError(t, err)
		body, err := enc.Encode(fuzzCSV{a, b, c})
		require.NoError(t, err)
		r := csv.NewReader(strings.NewReader(string(body)))
		r.Comma = delim
		r.FieldsPerRecord = 3
		record, err := r.Read()
		require.NoError(t, err, "body %q", body)
		// encoding/csv reads a quoted CRLF as LF.
		norm := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
		require.Equal(t, []string{norm(a), norm(b), norm(c)}, record)
	})
}

func mustSchema[T any]() *Schema {
	s, err := NewSchema(reflect.TypeFor[T]())
	if err != nil {
		panic(err)
	}
	return s
}

// FuzzCSVOptions feeds arbitrary option values: validation must never panic, and a format it
// accepts must encode without error when quoting is on.
func FuzzCSVOptions(f *testing.F) {
	f.Add(";", "NULL", "'", "")
	f.Add(`\t`, "", `"`, "false")
	f.Add("ab", ",", "", "true")
	f.Fuzz(func(t *testing.T, delim, null, quote, disable string) {
		format := formats.CSV()
		for k, v := range map[string]string{formats.OptionCSVFieldDelimiter: delim, formats.OptionCSVNullLiteral: null,
			formats.OptionCSVQuoteCharacter: quote, formats.OptionCSVDisableQuoteCharacter: disable} {
			if v != "" {
				format = format.With(k, v)
			}
		}
		enc, err := NewEncoder(format, mustSchema[fuzzCSV]())
		if err != nil {
			return
		}
		o, err := parseCSVOptions(format.Options)
		require.NoError(t, err)
		if o.quote == 0 {
			return
		}
		_, err = enc.Encode(fuzzCSV{A: delim, B: null, C: quote + "\n"})
		require.NoError(t, err)
	})
}
