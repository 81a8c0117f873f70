package cloudtasksio

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

var errorType = reflect.TypeOf((*error)(nil)).Elem()

// closureName matches the compiler's names for function literals ("pkg.Outer.func1") and
// method values ("pkg.T.Method-fm"): neither survives the trip to a worker.
var closureName = regexp.MustCompile(`\.func\d+(\.\d+)*$|-fm$`)

// encodeUserFunc checks that fn is a registered top-level func(T) (R, error) for the element
// type elem and wraps it for the DoFn's serialized form. field names the Config field.
func encodeUserFunc(field string, fn any, elem, ret reflect.Type) (*beam.EncodedFunc, error) {
	want := fmt.Sprintf("func(%v) (%v, error)", elem, ret)
	t := reflect.TypeOf(fn)
	if t == nil || t.Kind() != reflect.Func {
		return nil, errField(field, "must be a function %s, got %T", want, fn)
	}
	if reflect.ValueOf(fn).IsNil() {
		return nil, errField(field, "is a nil function")
	}
	if t.NumIn() != 1 || t.IsVariadic() || !elem.AssignableTo(t.In(0)) ||
		t.NumOut() != 2 || t.Out(0) != ret || t.Out(1) != errorType {
		return nil, errField(field, "has type %v; want %s for this PCollection", t, want)
	}
	name := reflectx.FunctionName(fn)
	if closureName.MatchString(name) {
		return nil, errField(field, "is a closure or method value (%s); use a top-level function registered with register.Function1x2 in init()", name)
	}
	if !registered(name, t) {
		return nil, errField(field, "(%s) is not registered; add %s to an init() function of its package",
			name, registrationHint(name))
	}
	f := reflectx.MakeFunc(fn)
	return &beam.EncodedFunc{Fn: f}, nil
}

// registered reports whether the function called name was registered with the Beam runtime
// (the register package does that). It asks the runtime with symbol-table lookup switched off,
// the way Beam's own vet runner tells registered functions from the rest; an unregistered
// function may not be found by name on a worker.
//
// Switching lookup off means swapping runtime.Resolver, a package variable of Beam's that
// runtime.ResolveFunction reads under a lock of its own that this package cannot take.
// resolverMu makes concurrent callers of registered safe against each other (without it, two
// overlapping swaps can restore each other's stand-in and leave lookup off for good), but
// nothing orders the swap against Beam itself. So registered is for pipeline construction
// only, where Beam runs on the one goroutine building the pipeline; it must never run on a
// worker path. A worker in the same process (prism or LOOPBACK in tests) is safe in practice
// because registered functions are answered from the runtime's cache before the resolver is
// read, but that is Beam's detail, not a promise.
func registered(name string, t reflect.Type) bool {
	resolverMu.Lock()
	defer resolverMu.Unlock()
	saved := runtime.Resolver
	runtime.Resolver = noSymbols{}
	defer func() { runtime.Resolver = saved }()
	_, err := runtime.ResolveFunction(name, t)
	return err == nil
}

var resolverMu sync.Mutex

// noSymbols is a symbol resolver that finds nothing.
type noSymbols struct{}

func (noSymbols) Sym2Addr(name string) (uintptr, error) {
	return 0, fmt.Errorf("%s is not registered", name)
}

// registrationHint returns the registration call for the top-level function called full
// ("example.com/mypipe.orderKey"), as a user pastes it into the function's own package:
// "register.Function1x2(orderKey)". Beam infers the type parameters from the function.
func registrationHint(full string) string {
	ident := full[strings.LastIndexByte(full, '/')+1:]
	ident = ident[strings.IndexByte(ident, '.')+1:]
	return "register.Function1x2(" + ident + ")"
}

// call1x2 calls a decoded user function and splits its results. A panic in the function comes
// back as an error, and so does an error interface holding a nil pointer (whose Error method
// would panic when the error is printed): the caller decides whether that is the element's
// failure or the bundle's, as for any error the function returns.
func call1x2(f reflectx.Func1x2, elem any) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panicked: %s", boundedtext.Sprint(r, maxErrorText))
		}
	}()
	out, errOut := f.Call1x2(elem)
	if errOut == nil {
		return out, nil
	}
	err = errOut.(error)
	if v := reflect.ValueOf(err); v.Kind() == reflect.Pointer && v.IsNil() {
		return out, fmt.Errorf("returned a nil %T as its error", err)
	}
	return out, err
}

// boundedError is err with its text cut to maxErrorText, for a user function's error that fails
// the bundle: errors.Is and errors.As still see err.
type boundedError struct{ err error }

func (e boundedError) Error() string { return boundedtext.Cut(e.err.Error(), maxErrorText) }
func (e boundedError) Unwrap() error { return e.err }
