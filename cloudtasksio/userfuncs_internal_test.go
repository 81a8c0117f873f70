package cloudtasksio

import (
	"reflect"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() { register.Function1x2(resolverProbeRegistered) }

func resolverProbeRegistered(s string) (string, error)   { return s, nil }
func resolverProbeUnregistered(s string) (string, error) { return s, nil }

// TestRegisteredRestoresTheResolverUnderConcurrentCallers checks the two promises of the
// runtime.Resolver swap in registered: the answer is right, and Beam's resolver is back in
// place afterwards, even when many goroutines ask at once (pipelines built in parallel tests).
func TestRegisteredRestoresTheResolverUnderConcurrentCallers(t *testing.T) {
	original := runtime.Resolver
	yes := reflectx.FunctionName(resolverProbeRegistered)
	no := reflectx.FunctionName(resolverProbeUnregistered)
	typ := reflect.TypeOf(resolverProbeRegistered)

	if !registered(yes, typ) {
		t.Fatalf("registered(%s) = false for a function registered in init", yes)
	}
	if registered(no, typ) {
		t.Fatalf("registered(%s) = true for a function never registered", no)
	}

	const goroutines, rounds = 16, 200
	wrong := make(chan string, goroutines*rounds)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				name, want := yes, true
				if (g+i)%2 == 1 {
					name, want = no, false
				}
				if registered(name, typ) != want {
					wrong <- name
				}
			}
		}()
	}
	wg.Wait()
	close(wrong)
	for name := range wrong {
		t.Errorf("registered(%s) gave the wrong answer under concurrent callers", name)
	}
	if runtime.Resolver != original {
		t.Fatalf("runtime.Resolver is %T after concurrent calls; want Beam's own resolver (%T) restored", runtime.Resolver, original)
	}
}
