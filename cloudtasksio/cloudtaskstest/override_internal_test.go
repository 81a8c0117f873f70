package cloudtaskstest

import (
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"
)

func TestOverrideURLFollowsTheUriOverrideRules(t *testing.T) {
	ifNot := cloudtaskspb.UriOverride_IF_NOT_EXISTS
	cases := []struct {
		name, task string
		o          *cloudtaskspb.UriOverride
		want       string
	}{
		{"no override", "https://a.example.com/p?q=1", nil, "https://a.example.com/p?q=1"},
		{"unspecified scheme is HTTPS", "http://a.example.com/p", &cloudtaskspb.UriOverride{Scheme: cloudtaskspb.UriOverride_SCHEME_UNSPECIFIED.Enum()}, "https://a.example.com/p"},
		{"host keeps the task's port", "http://a.example.com:8080/p", &cloudtaskspb.UriOverride{Host: proto.String("b.example.com")}, "http://b.example.com:8080/p"},
		{"IPv6 host", "http://a.example.com:8080/p", &cloudtaskspb.UriOverride{Host: proto.String("[::1]")}, "http://[::1]:8080/p"},
		{"port 0 clears the port", "http://a.example.com:8080/p", &cloudtaskspb.UriOverride{Port: proto.Int64(0)}, "http://a.example.com/p"},
		{"port on an IPv6 host", "http://[::1]/p", &cloudtaskspb.UriOverride{Port: proto.Int64(9000)}, "http://[::1]:9000/p"},
		{"empty query clears it", "http://a.example.com/p?q=1", &cloudtaskspb.UriOverride{QueryOverride: &cloudtaskspb.QueryOverride{}}, "http://a.example.com/p"},
		{"unset parts stay", "http://a.example.com:1/p?q=1", &cloudtaskspb.UriOverride{}, "http://a.example.com:1/p?q=1"},
		{"IF_NOT_EXISTS keeps scheme and host", "http://a.example.com/p", &cloudtaskspb.UriOverride{UriOverrideEnforceMode: ifNot,
			Scheme: cloudtaskspb.UriOverride_HTTPS.Enum(), Host: proto.String("b.example.com")}, "http://a.example.com/p"},
		{"IF_NOT_EXISTS fills a missing port", "http://a.example.com/p", &cloudtaskspb.UriOverride{UriOverrideEnforceMode: ifNot, Port: proto.Int64(81)}, "http://a.example.com:81/p"},
		{"IF_NOT_EXISTS keeps a port", "http://a.example.com:80/p", &cloudtaskspb.UriOverride{UriOverrideEnforceMode: ifNot, Port: proto.Int64(81)}, "http://a.example.com:80/p"},
		{"IF_NOT_EXISTS fills the root path", "http://a.example.com/", &cloudtaskspb.UriOverride{UriOverrideEnforceMode: ifNot,
			PathOverride: &cloudtaskspb.PathOverride{Path: "/x"}}, "http://a.example.com/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, overrideURL(tc.task, tc.o))
		})
	}
}
