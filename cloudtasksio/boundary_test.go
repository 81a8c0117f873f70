package cloudtasksio

import (
	"context"
	"go/ast"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary/boundarytest"
)

// TestNoHandWrittenPackagePrefixOutsideTheBoundary keeps the package prefix in boundary.go: a
// string literal that starts with it anywhere else is an error or a log line that adds the
// prefix by hand, and would show it twice once it crosses the boundary. The exactly-once label
// is kept there too (stagedErrorf, stagedLabel).
func TestNoHandWrittenPackagePrefixOutsideTheBoundary(t *testing.T) {
	src := boundarytest.Parse(t, 20)
	src.NoHandWrittenPrefix(t, string(pkgPrefix), true)
	src.NoHandWrittenPrefix(t, stagedLabel, true)
}

// doFnMethods are the methods Beam calls on a DoFn.
var doFnMethods = map[string]bool{"Setup": true, "StartBundle": true, "ProcessElement": true, "FinishBundle": true, "Teardown": true}

// TestDoFnMethodsReturnTheirErrorsThroughTheBoundary checks that every error a DoFn of the
// package returns to Beam goes through withPrefix: each return statement of each DoFn method is
// "return nil" or "return withPrefix(...)". A method returning an error by another way would
// hand Beam an error without the prefix.
func TestDoFnMethodsReturnTheirErrorsThroughTheBoundary(t *testing.T) {
	src := boundarytest.Parse(t, 20)
	fset := src.Fset
	methods := map[string]bool{}
	for _, f := range src.Files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !doFnMethods[fn.Name.Name] || fn.Type.Results == nil {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			id, ok := recv.(*ast.Ident)
			if !ok {
				continue
			}
			methods[id.Name+"."+fn.Name.Name] = true
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if _, ok := n.(*ast.FuncLit); ok {
					return false // a closure's returns are not the method's
				}
				ret, ok := n.(*ast.ReturnStmt)
				if !ok {
					return true
				}
				pos := fset.Position(ret.Pos())
				if !assert.Len(t, ret.Results, 1, "%s: %s.%s", pos, id.Name, fn.Name.Name) {
					return true
				}
				switch r := ret.Results[0].(type) {
				case *ast.Ident:
					assert.Equal(t, "nil", r.Name, "%s: %s.%s returns an error without withPrefix", pos, id.Name, fn.Name.Name)
				case *ast.CallExpr:
					callee, _ := r.Fun.(*ast.Ident)
					assert.True(t, callee != nil && callee.Name == "withPrefix", "%s: %s.%s returns an error without withPrefix", pos, id.Name, fn.Name.Name)
				default:
					t.Errorf("%s: %s.%s returns an error without withPrefix", pos, id.Name, fn.Name.Name)
				}
				return true
			})
		}
	}
	for _, m := range []string{
		"writeFn.Setup", "writeFn.StartBundle", "writeFn.ProcessElement", "writeFn.FinishBundle",
		"stageFn.Setup", "stageFn.ProcessElement",
		"stagedCreateFn.Setup", "stagedCreateFn.StartBundle", "stagedCreateFn.ProcessElement", "stagedCreateFn.FinishBundle",
	} {
		assert.True(t, methods[m], "%s was not found: the check saw no such method", m)
	}
}

func init() { register.Function1x2(queueWithASlash) }

// queueWithASlash is a QueueFn that returns a queue whose name is not a queue id.
func queueWithASlash(urlOrder) (Queue, error) {
	return Queue{Project: "p", Location: "l", Name: "bad/name"}, nil
}

// assertPrefixedOnce checks that err, as Beam sees it, starts with the package prefix and
// carries it once.
func assertPrefixedOnce(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	assert.True(t, strings.HasPrefix(err.Error(), string(pkgPrefix)), "%s: %q does not start with the package prefix", what, err)
	assert.Equal(t, 1, strings.Count(err.Error(), "cloudtasksio:"), "%s: %q", what, err)
}

// TestRuntimeErrorsReachBeamWithThePackagePrefixOnce drives the DoFns into failures built in
// different layers (a user function's result, the sink's own size check, the engine's
// terminal failure, the exactly-once envelope check, the worker's spec check) and checks the
// error Beam receives: the prefix once, at its start.
func TestRuntimeErrorsReachBeamWithThePackagePrefixOnce(t *testing.T) {
	ctx := context.Background()

	t.Run("a QueueFn returning an invalid queue", func(t *testing.T) {
		srv := newBundleServer(t)
		cfg := Config{QueueFn: queueWithASlash, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
			EmulatorEndpoint: srv.Addr, Writer: WriterOptions{QueuePreflight: PreflightOff}}
		spec, err := compile(cfg, typeOf(urlOrder{}))
		require.NoError(t, err)
		f := &writeFn{Spec: spec}
		require.NoError(t, f.Setup())
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
		err = f.ProcessElement(ctx, 0, urlOrder{ID: "1"}, discardDeadLetters)
		assertPrefixedOnce(t, err, "ProcessElement")
		assert.Contains(t, err.Error(), "Config.QueueFn returned an invalid queue: Queue.Name")
	})

	t.Run("an oversized task under FailBundle", func(t *testing.T) {
		f := newBundleWriteFn(t, newBundleServer(t), FailBundle, 10, WriterOptions{})
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
		err := f.ProcessElement(ctx, 0, urlOrder{ID: strings.Repeat("b", maxTaskBytes)}, discardDeadLetters)
		assertPrefixedOnce(t, err, "ProcessElement")
		assert.Contains(t, err.Error(), "(TASK_TOO_LARGE) under the FailBundle policy: the task for queue")
	})

	t.Run("a terminal create failure", func(t *testing.T) {
		srv := newBundleServer(t)
		srv.InjectErrors("CreateTask", codes.PermissionDenied)
		f := newBundleWriteFn(t, srv, DeadLetter, 10, WriterOptions{})
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
		require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: "1"}, discardDeadLetters))
		err := f.FinishBundle(ctx, discardDeadLetters)
		assertPrefixedOnce(t, err, "FinishBundle")
		assert.Contains(t, err.Error(), "PERMISSION_DENIED")
		assert.Equal(t, codes.PermissionDenied, status.Code(err), "the prefix keeps the status reachable")
		assertPrefixedOnce(t, f.ProcessElement(ctx, 0, urlOrder{ID: "2"}, discardDeadLetters), "ProcessElement after the failure")
	})

	t.Run("an exactly-once envelope of another queue", func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		envs := stageAll(t, eoSpec(t, "other", eoOrder{}, staged), eoOrder{ID: "1", Key: "k"})
		f := newStagedCreateFnWith(eoSpec(t, "q", eoOrder{}, staged), &fakeCreator{})
		require.NoError(t, f.Setup())
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
		err := f.ProcessElement(ctx, envs[0], discardDeadLetters)
		assertPrefixedOnce(t, err, "ProcessElement")
		assert.Contains(t, err.Error(), "cloudtasksio: exactly-once: a staged task is for queue")
		assert.Equal(t, 1, strings.Count(err.Error(), stagedLabel), err.Error())
		assertPrefixedOnce(t, f.FinishBundle(ctx, discardDeadLetters), "FinishBundle")
	})

	t.Run("a spec the worker refuses", func(t *testing.T) {
		spec := eoSpec(t, "q", eoOrder{}, DefaultStagedOptions())
		spec.Writer.MaxInFlightTasks = -1
		assertPrefixedOnce(t, (&writeFn{Spec: spec}).Setup(), "writeFn.Setup")
		assertPrefixedOnce(t, (&stagedCreateFn{Spec: spec}).Setup(), "stagedCreateFn.Setup")
		spec.Staged.RequestTimeout = -1
		assertPrefixedOnce(t, (&stageFn{Spec: spec}).Setup(), "stageFn.Setup")
	})
}

// TestDeadLettersAndDropLinesCarryNoRepeatedPrefix: a dead letter's Error is the reason its
// element failed, without the package prefix whatever failed; the LogAndDrop line about it has
// the prefix once.
func TestDeadLettersAndDropLinesCarryNoRepeatedPrefix(t *testing.T) {
	ctx := context.Background()
	big := urlOrder{ID: strings.Repeat("b", maxTaskBytes)}
	bad := urlOrder{ID: "1", URL: "not a url"}

	f := newBundleWriteFn(t, newBundleServer(t), DeadLetter, 10, WriterOptions{})
	var letters []deadletter.FailedElement
	collect := func(_ beam.EventTime, fe deadletter.FailedElement) { letters = append(letters, fe) }
	require.NoError(t, f.StartBundle(ctx, collect))
	require.NoError(t, f.ProcessElement(ctx, 0, big, collect))
	require.NoError(t, f.ProcessElement(ctx, 0, bad, collect))
	require.NoError(t, f.FinishBundle(ctx, collect))
	require.Len(t, letters, 2)
	assert.Equal(t, CodeTaskTooLarge, letters[0].Code)
	assert.Equal(t, CodeInvalidArgument, letters[1].Code)
	for _, fe := range letters {
		assert.NotContains(t, fe.Error, "cloudtasksio:", "%s", fe.Code)
		assert.NotEmpty(t, fe.Error)
	}

	logs := captureLogs(t)
	f = newBundleWriteFn(t, newBundleServer(t), LogAndDrop, 10, WriterOptions{})
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, big, discardDeadLetters))
	require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))
	lines := logLines(logs, "dropped an element")
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], "cloudtasksio: dropped an element for queue "+bundleQueue+" (TASK_TOO_LARGE): the task for queue")
	assert.Equal(t, 1, strings.Count(lines[0], "cloudtasksio:"), lines[0])
}

// TestStagedErrorsCarryTheExactlyOnceLabelOnce: an error of exactly-once delivery starts with
// the label once, also when it wraps one that has it (Rejected wraps the engine's error).
func TestStagedErrorsCarryTheExactlyOnceLabelOnce(t *testing.T) {
	inner := stagedErrorf("a staged task for queue %s cannot be decoded", "q")
	assert.EqualError(t, inner, "exactly-once: a staged task for queue q cannot be decoded")
	outer := stagedErrorf("%w (after %d attempt(s))", inner, 2)
	assert.EqualError(t, outer, "exactly-once: a staged task for queue q cannot be decoded (after 2 attempt(s))")
	assert.ErrorIs(t, outer, inner)
	assert.EqualError(t, withPrefix(outer), "cloudtasksio: exactly-once: a staged task for queue q cannot be decoded (after 2 attempt(s))")
}
