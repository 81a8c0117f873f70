package cloudtaskstest

import (
	"strings"
	"testing"
	"time"
)

func FuzzSplitTaskName(f *testing.F) {
	for _, s := range []string{testQueue + "/tasks/t-1_x", testQueue + "/tasks/", "projects/p/tasks/x",
		testQueue + "/tasks/a/tasks/b", "projects/p/locations/l/queues/" + strings.Repeat("q", 101) + "/tasks/t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		queue, err := splitTaskName("name", name)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "rpc error: code = InvalidArgument desc = name: ") {
				t.Fatalf("error %q is not INVALID_ARGUMENT naming the field", err)
			}
			return
		}
		id, ok := strings.CutPrefix(name, queue+"/tasks/")
		if !ok || checkQueueName("name", queue) != nil || !taskIDRe.MatchString(id) {
			t.Fatalf("splitTaskName(%q) accepted queue %q", name, queue)
		}
	})
}

// Only tokens the authority issued verify, with the claims it issued;
// anything else is refused without a panic. (A JWT's signature segment can be
// re-encoded in more than one way, so the OIDC check compares claims, not
// strings.)
func FuzzVerifyTokens(f *testing.F) {
	a := newAuthority(DefaultOIDCIssuer, time.Now, nil)
	oidc, err := a.oidcToken("sa@p.iam.gserviceaccount.com", "https://x.example")
	if err != nil {
		f.Fatal(err)
	}
	oauth := a.oauthToken("sa@p.iam.gserviceaccount.com", "")
	for _, s := range []string{oidc, "Bearer " + oidc, oauth, "a.b.c", "", "ya29.cloudtaskstest.x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		tok := strings.TrimPrefix(strings.TrimSpace(token), "Bearer ")
		if c, err := a.verifyOIDC(token); err == nil && (c.Email != "sa@p.iam.gserviceaccount.com" || c.Audience != "https://x.example") {
			t.Fatalf("a token the server did not issue verified as OIDC: %q", token)
		}
		if g, err := a.verifyOAuth(token); err == nil && (tok != oauth || g.Scope != DefaultOAuthScope) {
			t.Fatalf("a token the server did not issue verified as OAuth: %q", token)
		}
	})
}
