package engine

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine/adaptive"
)

// Class is what the engine does with a failed CreateTask or DeleteTask call.
// Classify and ClassifyDelete are the only places that decide it.
type Class int

const (
	// Transient failures (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, or
	// a bare context.DeadlineExceeded, anywhere in the error chain) are retried
	// on the transient budget.
	Transient Class = iota + 1
	// NotFound failures (NOT_FOUND as the first status in the chain) are retried
	// on the short NOT_FOUND budget: the queue may be reactivating after being
	// idle.
	NotFound
	// Deduplicated means ALREADY_EXISTS for a named task: an earlier attempt
	// (or an earlier run) already created it, so the create counts as a success.
	Deduplicated
	// Invalid means INVALID_ARGUMENT as the first status in the chain with
	// nothing transient anywhere: the task itself is at fault, and the caller's
	// failure policy decides what happens to it.
	Invalid
	// Terminal failures are not retried and fail the whole batch of work: every
	// other status, ALREADY_EXISTS for an unnamed task, and errors that carry
	// no status at all.
	Terminal
	// TooLarge means the request was refused for its size before Cloud Tasks
	// read it: RESOURCE_EXHAUSTED with a message-size text (grpc-go's
	// "received message larger than max (N vs. M)", see IsMessageTooLarge)
	// anywhere in the chain. Like Invalid it goes to the caller's failure
	// policy: the same request fails the same way however often it is sent, so
	// it is never retried, and it says nothing about the queue's quota.
	TooLarge
	// Gone means NOT_FOUND for a delete whose status does not name the queue
	// (IsQueueNotFound): the task is not there, because it ran, was deleted,
	// or never existed. The delete counts as a success (ClassifyDelete).
	Gone
)

// String returns the class name, for example "Transient".
func (c Class) String() string {
	switch c {
	case Transient:
		return "Transient"
	case NotFound:
		return "NotFound"
	case Deduplicated:
		return "Deduplicated"
	case Invalid:
		return "Invalid"
	case Terminal:
		return "Terminal"
	case TooLarge:
		return "TooLarge"
	case Gone:
		return "Gone"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// grpcStatuser is implemented by gRPC status errors and by gax's
// *apierror.APIError.
type grpcStatuser interface {
	GRPCStatus() *status.Status
}

// maxChainNodes bounds the walk over an error chain. A chain is walked whole
// (a node met again, as in a cycle, is not walked twice); only an endless
// chain, which a custom Unwrap can build, or one of more nodes than this is
// cut, and a cut chain counts as unreadable.
const maxChainNodes = 1 << 16

// nodeStatus reports the status carried by one node of an error chain (not by
// the errors it wraps). A bare context.DeadlineExceeded counts as
// DEADLINE_EXCEEDED: gax returns it when a context expires between retries.
// A status with code OK is ignored.
// readable is false when the node is a typed nil or its GRPCStatus method
// panics.
func nodeStatus(node error) (code codes.Code, msg string, ok, readable bool) {
	if node == context.DeadlineExceeded {
		return codes.DeadlineExceeded, node.Error(), true, true
	}
	if isNilValue(node) {
		return 0, "", false, false
	}
	s, isStatuser := node.(grpcStatuser)
	if !isStatuser {
		return 0, "", false, true
	}
	st, readable := safeStatus(s)
	if !readable || st == nil || st.Code() == codes.OK {
		return 0, "", false, readable
	}
	return st.Code(), st.Message(), true, true
}

// isNilValue reports whether err is a non-nil interface holding a nil pointer
// (or other nil reference): calling its methods may panic.
func isNilValue(err error) bool {
	v := reflect.ValueOf(err)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

func safeStatus(s grpcStatuser) (st *status.Status, ok bool) {
	defer func() {
		if recover() != nil {
			st, ok = nil, false
		}
	}()
	return s.GRPCStatus(), true
}

// safeUnwrap returns the errors node wraps; ok is false when its Unwrap
// method panics.
func safeUnwrap(node error) (children []error, ok bool) {
	defer func() {
		if recover() != nil {
			children, ok = nil, false
		}
	}()
	switch u := node.(type) {
	case interface{ Unwrap() error }:
		return []error{u.Unwrap()}, true
	case interface{ Unwrap() []error }:
		return u.Unwrap(), true
	}
	return nil, true
}

// firstVisit records node in seen and reports whether it was not there yet.
// Nodes of a type that cannot be compared are always new.
func firstVisit(seen map[any]struct{}, node error) (first bool) {
	defer func() {
		if recover() != nil {
			first = true // a comparable type holding an incomparable value
		}
	}()
	if !reflect.TypeOf(node).Comparable() {
		return true
	}
	if _, dup := seen[node]; dup {
		return false
	}
	seen[node] = struct{}{}
	return true
}

// walkChain visits err and every error it wraps, depth first and in order
// (errors.Unwrap and Unwrap() []error), until visit returns false. It never
// panics: a typed-nil node is visited but not unwrapped, and a node whose
// methods panic is skipped. readable is false when some part of the chain
// could not be read (a typed nil, a panicking method, a chain cut at
// maxChainNodes).
func walkChain(err error, visit func(node error) bool) (readable bool) {
	readable = true
	seen := map[any]struct{}{}
	stack := []error{err}
	for n := 0; len(stack) > 0; n++ {
		if n == maxChainNodes {
			return false
		}
		node := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if node == nil || !firstVisit(seen, node) {
			continue
		}
		if !visit(node) {
			return readable
		}
		if isNilValue(node) {
			readable = false
			continue
		}
		children, ok := safeUnwrap(node)
		if !ok {
			readable = false
			continue
		}
		for i := len(children) - 1; i >= 0; i-- {
			stack = append(stack, children[i])
		}
	}
	return readable
}

func isTransientCode(c codes.Code) bool {
	return c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.ResourceExhausted
}

// tooLargeTexts are the messages gRPC implementations give, with RESOURCE_EXHAUSTED, to a
// message over a size limit, lower-cased: grpc-go and gRPC C++ ("received message larger than
// max (5242973 vs. 4194304)", "received message after decompression larger than max",
// "trying to send message larger than max", "Sent message larger than max"), grpc-java ("gRPC
// message exceeds maximum size 4194304: 5242973") and HTTP/2 proxies ("message too large").
// A quota rejection says nothing of the kind ("Quota exceeded for quota metric ...").
var tooLargeTexts = []string{"larger than max", "exceeds maximum size", "message too large"}

// IsMessageTooLarge reports whether a status of code and message says that a gRPC message was
// over a size limit: RESOURCE_EXHAUSTED with one of the texts gRPC implementations use for it.
// It is the one test of it; Classify and the adaptive limit use it.
func IsMessageTooLarge(code codes.Code, message string) bool {
	if code != codes.ResourceExhausted {
		return false
	}
	m := strings.ToLower(message)
	for _, t := range tooLargeTexts {
		if strings.Contains(m, t) {
			return true
		}
	}
	return false
}

// decision is the full result of classifying one error: the class, the status
// code that decided it and that status' message (empty when no status exists).
type decision struct {
	class   Class
	code    codes.Code
	message string
	hasCode bool
	// cancelled is true when a CANCELLED status (or context.Canceled) is in
	// the chain.
	cancelled bool
}

// classify implements Classify and also returns the deciding status, which
// error messages name.
func classify(err error, named bool) decision {
	var first, transient, tooLarge decision
	cancelled, nodesReadable := false, true
	chainReadable := walkChain(err, func(node error) bool {
		code, msg, ok, nodeReadable := nodeStatus(node)
		nodesReadable = nodesReadable && nodeReadable
		cancelled = cancelled || node == context.Canceled || ok && code == codes.Canceled
		if !ok {
			return true
		}
		if !first.hasCode {
			first = decision{code: code, message: msg, hasCode: true}
		}
		if IsMessageTooLarge(code, msg) {
			tooLarge = decision{class: TooLarge, code: code, message: msg, hasCode: true}
			return false
		}
		if isTransientCode(code) && !transient.hasCode {
			transient = decision{class: Transient, code: code, message: msg, hasCode: true}
		}
		return true // on: a size refusal further down outranks a transient status
	})
	readable := chainReadable && nodesReadable
	if tooLarge.hasCode {
		// Whatever else the chain holds, this request fails the same way on every attempt.
		tooLarge.cancelled = cancelled
		return tooLarge
	}
	if transient.hasCode {
		transient.cancelled = cancelled
		return transient
	}
	d := first
	d.cancelled = cancelled
	switch {
	case !readable:
		// Part of the chain is unreadable and may hold what would change the
		// outcome: fail rather than dead-letter, drop or count as created.
		d.class = Terminal
		d.message = strings.TrimSpace(d.message + " (part of the error chain could not be read)")
	case !d.hasCode:
		d.class = Terminal
	case d.code == codes.NotFound:
		d.class = NotFound
	case d.code == codes.AlreadyExists && named:
		d.class = Deduplicated
	case d.code == codes.InvalidArgument:
		d.class = Invalid
	default:
		d.class = Terminal
	}
	return d
}

// Classify decides what to do with a failed CreateTask call; named says
// whether the request carried a task name. It scans the whole error chain
// (errors.Unwrap and Unwrap() []error; any node with a GRPCStatus method,
// such as gax's *apierror.APIError, carries a status):
//
//   - RESOURCE_EXHAUSTED saying a message is over a size limit anywhere
//     (IsMessageTooLarge; grpc-go answers it before any handler runs):
//     TooLarge, whatever else the chain holds.
//   - UNAVAILABLE, DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED anywhere, or a bare
//     context.DeadlineExceeded anywhere: Transient, even when an outer status
//     says something else, so an outage never reaches a failure policy.
//   - otherwise the first status found decides: NOT_FOUND is NotFound;
//     ALREADY_EXISTS is Deduplicated for a named task and Terminal for an
//     unnamed one; INVALID_ARGUMENT is Invalid (an INVALID_ARGUMENT wrapped
//     under INTERNAL therefore stays Terminal); any other code is Terminal.
//   - an error with no status anywhere (and a nil error) is Terminal.
//   - a chain that cannot be read whole (a typed-nil node, an Unwrap or
//     GRPCStatus method that panics, an endless chain) is Terminal unless a
//     transient status was found: what could not be read might have changed
//     the outcome, so it is never Invalid, NotFound or Deduplicated.
//
// It never panics, whatever the error's types do.
func Classify(err error, named bool) Class {
	return classify(err, named).class
}

// ClassifyDelete decides what to do with a failed DeleteTask call, as
// Classify does for a named create, with two differences:
//
//   - NOT_FOUND is Gone, a success, unless its message names the queue
//     (IsQueueNotFound): then it is NotFound, retried on the NOT_FOUND budget
//     like a create's, because a queue that does not exist must not make every
//     delete look done.
//   - ALREADY_EXISTS means nothing for a delete: Terminal.
func ClassifyDelete(err error) Class { return classifyDelete(err).class }

// classifyDelete implements ClassifyDelete, returning the deciding status.
func classifyDelete(err error) decision {
	d := classify(err, false)
	if d.class == NotFound && !IsQueueNotFound(d.message) {
		d.class = Gone
	}
	return d
}

// IsQueueNotFound reports whether the message of a NOT_FOUND status says that
// the queue, not the task, is missing: it mentions the queue. Cloud Tasks
// answers a call about a queue that does not exist (CreateTask, GetQueue) with
// "Queue does not exist. If you just created the queue, wait at least a
// minute for the queue to initialize.", and a call about a task that is not
// there with "Requested entity was not found." (DeleteTask, GetTask, RunTask)
// or, for a task that ran or was deleted within the name's retention, "The
// task no longer exists, though a task with this name existed recently. ...".
// It is the one test of it.
func IsQueueNotFound(message string) bool {
	return strings.Contains(strings.ToLower(message), "queue")
}

// OutermostCode names the first status in err's chain in canonical
// UPPER_SNAKE form ("UNAVAILABLE"), the name failed-attempt metrics use. A
// bare context.DeadlineExceeded counts as "DEADLINE_EXCEEDED"; an error
// without any status (and a nil error) is "UNKNOWN".
func OutermostCode(err error) string {
	name := CodeName(codes.Unknown)
	walkChain(err, func(node error) bool {
		code, _, ok, _ := nodeStatus(node)
		if ok {
			name = CodeName(code)
		}
		return !ok
	})
	return name
}

var codeNames = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// CodeName returns the canonical UPPER_SNAKE name of a gRPC code, as written
// in google/rpc/code.proto: codes.Unavailable is "UNAVAILABLE", codes.Canceled
// is "CANCELLED". A code outside the canonical set is named "CODE_<n>".
func CodeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "CODE_" + strconv.FormatUint(uint64(c), 10)
}

// throttle reads what a failed create says about the queue's quota:
// throttled is true when RESOURCE_EXHAUSTED is anywhere in err's chain, other
// than one refusing a message for its size (IsMessageTooLarge), and
// delay is the retry_delay of a google.rpc.RetryInfo detail of such a status
// (bounded by adaptive.MaxRetryDelay; 0 when there is none).
func throttle(err error) (throttled bool, delay time.Duration) {
	if err == nil {
		return false, 0
	}
	walkChain(err, func(node error) bool {
		code, msg, ok, _ := nodeStatus(node)
		if !ok || code != codes.ResourceExhausted || IsMessageTooLarge(code, msg) {
			return true // a request over a size limit says nothing of the quota
		}
		throttled = true
		if s, isStatuser := node.(grpcStatuser); isStatuser {
			if st, readable := safeStatus(s); readable && st != nil {
				for _, d := range st.Details() {
					if ri, isRetryInfo := d.(*errdetails.RetryInfo); isRetryInfo && ri.GetRetryDelay().IsValid() {
						delay = max(delay, ri.GetRetryDelay().AsDuration())
					}
				}
			}
		}
		return true
	})
	return throttled, min(max(delay, 0), adaptive.MaxRetryDelay)
}
