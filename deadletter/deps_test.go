package deadletter_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSinkPackagesDoNotLinkThePubSubClient guards the split of the Pub/Sub output into
// deadletter/pubsubdl: a program that imports only cloudtasksio (and so deadletter) must not
// link the Pub/Sub client library.
func TestSinkPackagesDoNotLinkThePubSubClient(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test lists package dependencies with the go command, which is not on PATH: %v", err)
	}
	for _, pkg := range []string{
		"github.com/beam-cloudtasks/beam-cloudtasks/deadletter",
		"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio",
	} {
		out, err := exec.Command(goTool, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		var pubsub []string
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(strings.ToLower(dep), "pubsub") {
				pubsub = append(pubsub, dep)
			}
		}
		if len(pubsub) != 0 {
			t.Errorf("%s links %d Pub/Sub packages, want none (the Pub/Sub output belongs in deadletter/pubsubdl): %v", pkg, len(pubsub), pubsub)
		}
	}
}
