package cloudtasksio_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// TestErrorsRepeatAtMostACutOfTheInput: a 1 MiB key or queue name once came back whole, in a
// 1 MiB error. Every error that repeats input now cuts it short.
func TestErrorsRepeatAtMostACutOfTheInput(t *testing.T) {
	huge := strings.Repeat("q", 1<<20)
	_, err := cloudtasksio.ParseQueue(huge)
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 512)

	_, err = cloudtasksio.NewQueue("p", "l", huge+"/x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Queue.Name")
	assert.Less(t, len(err.Error()), 512)

	_, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{huge: "v"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unknown option key")
	assert.Less(t, len(err.Error()), 2048)

	_, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"http.headers." + huge + "\n": "v", "http.url": "https://example.com/"}))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 2048)
}

// TestValuesThatCannotWorkAreRefusedAtConstruction: each names the field at fault.
func TestValuesThatCannotWorkAreRefusedAtConstruction(t *testing.T) {
	long := strings.Repeat("a", 300)
	for _, c := range []struct {
		name string
		cfg  cloudtasksio.Config
		want string
		not  string
	}{
		{"NUL in the key file path", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), ServiceAccountKeyFile: "/secrets/key\x00.json"},
			"ServiceAccountKeyFile contains a NUL byte", ""},
		{"a 1 MiB emulator host", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: strings.Repeat("h", 1<<20) + ":8123"},
			"EmulatorEndpoint", ""},
		{"an emulator with a scheme", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: "http://127.0.0.1:8123"},
			`drop the scheme: the endpoint is host:port only, here "127.0.0.1:8123"`, "bracket"},
		{"a token in the endpoint", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Client: cloudtasksio.ClientOptions{Endpoint: "user:tok3n-secret@cloudtasks.googleapis.com:443"}},
			"Client.Endpoint", "tok3n-secret"},
		{"a 1 MiB impersonation e-mail", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Client: cloudtasksio.ClientOptions{ImpersonateServiceAccount: strings.Repeat("x", 1<<20) + "@p.iam.gserviceaccount.com"}},
			"Client.ImpersonateServiceAccount", ""},
		{"a 300-byte OIDC e-mail", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/", OIDC: &cloudtasksio.OIDCToken{ServiceAccountEmail: long + "@p.iam.gserviceaccount.com"}}},
			"OIDC.ServiceAccountEmail", ""},
		{"an OAuth e-mail with a NUL", cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://e.com/", OAuth: &cloudtasksio.OAuthToken{ServiceAccountEmail: "a\x00b@p.iam.gserviceaccount.com"}}},
			"OAuth.ServiceAccountEmail", ""},
		{"a 101-character project", cloudtasksio.Config{Queue: cloudtasksio.Queue{Project: strings.Repeat("p", 101), Location: "l", Name: "q"}, HTTP: validHTTP()},
			"Queue.Project", ""},
		{"a 64-character location", cloudtasksio.Config{Queue: cloudtasksio.Queue{Project: "p", Location: strings.Repeat("l", 64), Name: "q"}, HTTP: validHTTP()},
			"Queue.Location", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := tryWrite(c.cfg, order{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			if c.not != "" {
				assert.NotContains(t, err.Error(), c.not)
			}
			assert.Less(t, len(err.Error()), 1024)
		})
	}
}
