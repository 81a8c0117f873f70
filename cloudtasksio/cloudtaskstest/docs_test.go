package cloudtaskstest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// readDoc returns a page of the project's docs/ folder.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	require.NoError(t, err)
	return string(b)
}

// docHas and docHasNot check a page without printing it whole; runs of
// white space (line breaks included) compare as one space.
func docHas(t *testing.T, page, text, want string) {
	t.Helper()
	if !strings.Contains(oneLine(text), want) {
		t.Errorf("docs/%s does not contain %q", page, want)
	}
}

func docHasNot(t *testing.T, page, text, unwanted string) {
	t.Helper()
	if strings.Contains(oneLine(text), unwanted) {
		t.Errorf("docs/%s still contains %q", page, unwanted)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// The Go v2 client sees a queue's target overrides, so docs/overview.md must
// not say otherwise (the reference's Java client is the one that cannot).
func TestQueueOverridesAreVisibleToTheGoV2Client(t *testing.T) {
	srv, client := start(t)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	_, err = client.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{Name: queueA,
			HttpTarget:               &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{Host: proto.String("elsewhere.example.com")}},
			AppEngineRoutingOverride: &cloudtaskspb.AppEngineRouting{Service: "worker"}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"http_target", "app_engine_routing_override"}},
	})
	require.NoError(t, err)
	q, err := client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, "elsewhere.example.com", q.GetHttpTarget().GetUriOverride().GetHost())
	assert.Equal(t, "worker", q.GetAppEngineRoutingOverride().GetService())

	overview := readDoc(t, "overview.md")
	docHasNot(t, "overview.md", overview, "cannot see that through the v2 API")
	docHas(t, "overview.md", overview, "Queue.HttpTarget")
	docHas(t, "overview.md", overview, "Queue.AppEngineRoutingOverride")
}

// docs/overview.md tells users what their endpoint must accept; each fact
// below is from the Cloud Tasks and Cloud Run documentation.
func TestOverviewHasTheEndpointGuidance(t *testing.T) {
	overview := readDoc(t, "overview.md")
	for _, want := range []string{
		"reachable from Cloud Tasks",
		"ingress `internal`",
		"`login: admin`",
		"redirect",
		"`503`",
		"`429`",
	} {
		docHas(t, "overview.md", overview, want)
	}
}

// The community aertje emulator does dispatch App Engine tasks (task.go of
// github.com/aertje/cloud-tasks-emulator: to APP_ENGINE_EMULATOR_HOST, else
// to https://<project>.appspot.com); docs/testing.md must not say it lacks
// that.
func TestTestingDocDoesNotClaimAertjeLacksAppEngineDispatch(t *testing.T) {
	doc := readDoc(t, "testing.md")
	i := strings.Index(doc, "adds what that emulator lacks")
	if i >= 0 {
		end := strings.Index(doc[i:], "\n\n")
		docHasNot(t, "testing.md", doc[i:i+end], "App Engine dispatch")
	}
	docHas(t, "testing.md", doc, "appspot.com") // where aertje sends App Engine tasks without the variable
}
