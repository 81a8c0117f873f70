package cloudtaskstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Fault injection and observation. Every unary call passes through
// Server.intercept, which in order: counts the call, waits out SetLatency
// (CreateTask), answers a scripted error (InjectErrors, InjectError) or a
// Reactor's answer, or else serves the call (where the create quota and
// SetRejectFunc run), turns a stored task's answer into UNAVAILABLE
// (LoseResponses), shows the call to its observers, and counts the outcome.
// The scripts live here; the counts live in stats.go.

const betaPrefix = "v2beta3."

// Reactor decides the answer to a call before the server serves it, in the
// style of pstest's reactors. React gets the request (do not modify it) and
// returns handled = false to let the call go on, or handled = true with the
// answer: an error (any gRPC status error, with details if it likes), or a
// response of the method's response type (for CreateTask, a
// *cloudtaskspb.Task). A handled call stores nothing. React runs on the
// server's goroutines and must be safe for concurrent use.
type Reactor interface {
	React(req proto.Message) (handled bool, resp proto.Message, err error)
}

// ReactorFunc adapts a function to a Reactor.
type ReactorFunc func(req proto.Message) (handled bool, resp proto.Message, err error)

// React calls f.
func (f ReactorFunc) React(req proto.Message) (bool, proto.Message, error) { return f(req) }

// Call is one answered call, as an observer (Observe) sees it.
type Call struct {
	// Method is the method's name as InjectErrors takes it ("CreateTask",
	// "v2beta3.GetQueue").
	Method string
	// Request is the request the client sent. Do not modify it.
	Request proto.Message
	// Response is what the client receives, nil when Err is set. Do not
	// modify it.
	Response proto.Message
	// Err is the status error the client receives, scripted and lost
	// responses included; nil on success.
	Err error
	// Start is when the call reached the server and End when it was
	// answered, by the server's clock (WithClock).
	Start, End time.Time
}

// faults holds what a test scripted: error scripts, reactors, lost
// responses, latency, and the observers that watch calls.
type faults struct {
	mu        sync.Mutex
	scripts   map[string][]error // nil entry: serve the call
	reactors  map[string][]Reactor
	observers map[string]map[int]func(Call) // "*": every method
	nextObs   int
	lose      int
	latency   time.Duration
}

func newFaults() *faults {
	return &faults{scripts: map[string][]error{}, reactors: map[string][]Reactor{}, observers: map[string]map[int]func(Call){}}
}

// knownMethods is the set of method names the fault and observer API takes.
var knownMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range cloudtaskspb.CloudTasks_ServiceDesc.Methods {
		m[d.MethodName] = true
	}
	for _, d := range betapb.CloudTasks_ServiceDesc.Methods {
		m[betaPrefix+d.MethodName] = true
	}
	return m
}()

// checkMethodName panics on a method name the API does not have, naming the
// function the test called.
func checkMethodName(fn, method string) {
	if !knownMethods[method] {
		panic(fmt.Sprintf("cloudtaskstest.%s: unknown method %q (use a v2 method name such as \"CreateTask\", or \"v2beta3.GetQueue\")", fn, method))
	}
}

// methodKey turns a gRPC full method name into the InjectErrors name:
// "/google.cloud.tasks.v2.CloudTasks/CreateTask" -> "CreateTask",
// "/google.cloud.tasks.v2beta3.CloudTasks/GetQueue" -> "v2beta3.GetQueue".
func methodKey(full string) string {
	i := strings.LastIndex(full, "/")
	svc, name := full[:max(i, 0)], full[i+1:]
	if strings.Contains(svc, ".v2beta3.") {
		return betaPrefix + name
	}
	return name
}

// InjectErrors scripts the answers of the next len(cs) calls of method: the
// i-th call answers cs[i] without being served, except codes.OK, which
// serves the call normally. Calls beyond the script are served normally; a
// second InjectErrors (or InjectError) for the same method appends to its
// script.
//
// method is a v2 method name ("CreateTask", "GetQueue", "ListTasks", ...) or
// a v2beta3 method name with a "v2beta3." prefix ("v2beta3.GetQueue").
// InjectErrors panics on a name the API does not have, to catch typos.
func (s *Server) InjectErrors(method string, cs ...codes.Code) {
	checkMethodName("InjectErrors", method)
	errs := make([]error, len(cs))
	for i, c := range cs {
		if c != codes.OK {
			errs[i] = status.Errorf(c, "cloudtaskstest: injected %s for %s", c, method)
		}
	}
	s.fault.script(method, errs)
}

// InjectError is InjectErrors with whole errors: the i-th of the next
// len(errs) calls of method answers errs[i] without being served, and a nil
// entry serves the call normally. An error made with the status package
// reaches the client with its code, message and details, for example
//
//	st, _ := status.New(codes.ResourceExhausted, "quota").WithDetails(
//		&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)})
//	srv.InjectError("CreateTask", st.Err())
//
// Any other error reaches the client as UNKNOWN. It panics on a method name
// the API does not have.
func (s *Server) InjectError(method string, errs ...error) {
	checkMethodName("InjectError", method)
	s.fault.script(method, append([]error(nil), errs...))
}

// AddReactor makes r decide the calls of method before they are served,
// after any scripted answers (InjectErrors, InjectError) are used up.
// Reactors of a method run in the order they were added; the first that
// handles a call answers it. It panics on a method name the API does not
// have.
func (s *Server) AddReactor(method string, r Reactor) {
	checkMethodName("AddReactor", method)
	s.fault.mu.Lock()
	s.fault.reactors[method] = append(s.fault.reactors[method], r)
	s.fault.mu.Unlock()
}

// Observe makes fn see every call of method ("*": of every method) once it
// is answered: the request and the response or error the client receives,
// scripted errors, reactor answers and lost responses included. It never
// changes a call. fn runs on the server's goroutine before the answer is
// sent, so it must be quick and safe for concurrent use. The returned
// function stops the observer. It panics on a method name the API does not
// have.
func (s *Server) Observe(method string, fn func(Call)) (stop func()) {
	if method != "*" {
		checkMethodName("Observe", method)
	}
	f := s.fault
	f.mu.Lock()
	id := f.nextObs
	f.nextObs++
	if f.observers[method] == nil {
		f.observers[method] = map[int]func(Call){}
	}
	f.observers[method][id] = fn
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.observers[method], id)
		f.mu.Unlock()
	}
}

// LoseResponses makes the next n CreateTask calls that succeed store their
// task as usual but answer UNAVAILABLE, as when a response is lost on the way
// back. A client that retries an unnamed task then creates a duplicate; a
// named one gets ALREADY_EXISTS. Calls add to the count.
func (s *Server) LoseResponses(n int) {
	s.fault.mu.Lock()
	s.fault.lose = max(0, s.fault.lose+n)
	s.fault.mu.Unlock()
}

// SetLatency delays every CreateTask call by d before it is served (or
// answered with an injected code). The call counts as in flight while it
// waits. d <= 0 removes the delay.
func (s *Server) SetLatency(d time.Duration) {
	s.fault.mu.Lock()
	s.fault.latency = max(0, d)
	s.fault.mu.Unlock()
}

// SetRejectFunc installs a hook run on every CreateTask request that passed
// the server's own validation: a non-nil error is answered as
// INVALID_ARGUMENT with the error's text as the message, and nothing is
// stored. nil removes the hook. The hook runs on the server's goroutines and
// must be safe for concurrent use. To watch creates without rejecting any,
// use Observe; to answer another code, InjectError or AddReactor.
func (s *Server) SetRejectFunc(fn func(*cloudtaskspb.CreateTaskRequest) error) {
	s.store.setRejectFunc(fn)
}

func (f *faults) script(method string, errs []error) {
	f.mu.Lock()
	f.scripts[method] = append(f.scripts[method], errs...)
	f.mu.Unlock()
}

// decide returns the scripted or reactor answer for a call of method, if
// there is one.
func (f *faults) decide(method string, req proto.Message) (handled bool, resp proto.Message, err error) {
	f.mu.Lock()
	if s := f.scripts[method]; len(s) > 0 {
		err := s[0]
		if len(s) == 1 {
			delete(f.scripts, method)
		} else {
			f.scripts[method] = s[1:]
		}
		if err != nil {
			f.mu.Unlock()
			return true, nil, err
		}
	}
	rs := f.reactors[method]
	f.mu.Unlock()
	for _, r := range rs {
		if handled, resp, err := r.React(req); handled {
			if err == nil && resp == nil {
				err = status.Errorf(codes.Internal, "cloudtaskstest: a reactor for %s handled the call with neither a response nor an error", method)
			}
			return true, resp, err
		}
	}
	return false, nil, nil
}

func (f *faults) createLatency() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latency
}

// takeLost reports whether this stored task's answer is to be lost.
func (f *faults) takeLost() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lose > 0 {
		f.lose--
		return true
	}
	return false
}

func (f *faults) observersOf(method string) []func(Call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []func(Call)
	for _, m := range []string{method, "*"} {
		for _, fn := range f.observers[m] {
			out = append(out, fn)
		}
	}
	return out
}

// intercept runs every unary call: see the comment at the top of this file.
func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	method := methodKey(info.FullMethod)
	create := method == "CreateTask"
	start := s.cfg.now()
	s.counts.callStarted(create)
	s.idle.signal() // for WaitUntil
	var o callOutcome
	defer func() {
		s.counts.callEnded(create, o)
		s.idle.signal() // the store has woken the dispatcher for what the call changed
	}()
	defer func() {
		obs := s.fault.observersOf(method)
		if len(obs) == 0 {
			return
		}
		c := Call{Method: method, Err: err, Start: start, End: s.cfg.now()}
		c.Request, _ = req.(proto.Message)
		if err == nil {
			c.Response, _ = resp.(proto.Message)
		}
		for _, fn := range obs {
			fn(c)
		}
	}()

	if create {
		if lat := s.fault.createLatency(); lat > 0 {
			t := time.NewTimer(lat)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}
	}
	msg, _ := req.(proto.Message)
	if handled, r, e := s.fault.decide(method, msg); handled {
		o.injected = e != nil
		if e != nil {
			return nil, e
		}
		return r, nil
	}
	resp, err = handler(ctx, req)
	if !create {
		return resp, err
	}
	switch {
	case err == nil:
		o.stored = true
		if s.fault.takeLost() {
			o.lost = true
			return nil, status.Error(codes.Unavailable, "cloudtaskstest: response lost (the task was stored)")
		}
	case isQuotaRejection(err):
		o.quotaQueue = msg.(*cloudtaskspb.CreateTaskRequest).GetParent()
	case status.Code(err) == codes.AlreadyExists:
		o.alreadyExists = true
	}
	return resp, err
}
