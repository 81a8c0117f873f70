// Package boundary prefixes the errors of a package where they leave it. Each public package
// of the module names itself at the start of its errors ("cloudtasksio: ", "pubsubdl: "),
// exactly once: the errors built inside a package carry no prefix, and the functions through
// which an error leaves the package (its exported functions, the DoFn methods Beam calls)
// return it through Prefix.Wrap. The package's own boundary.go declares its Prefix; a test
// of each package (see boundarytest) fails when the prefix is written by hand anywhere else.
package boundary

import "strings"

// Prefix is the text a package's errors start with, such as "deadletter: ".
type Prefix string

// Wrap returns err with the prefix, unless its text starts with it already (an error that
// crossed the boundary once, or an exported error type whose Error adds the prefix itself).
// It wraps err, so errors.Is, errors.As and status.Code see through it. A nil err stays nil.
func (p Prefix) Wrap(err error) error {
	if err == nil || strings.HasPrefix(err.Error(), string(p)) {
		return err
	}
	return &prefixedError{prefix: p, err: err}
}

// Text returns text with the prefix: for the Error method of an exported error type, a log
// line or the text of a panic.
func (p Prefix) Text(text string) string { return string(p) + text }

// prefixedError is an error that crossed a package boundary.
type prefixedError struct {
	prefix Prefix
	err    error
}

func (e *prefixedError) Error() string { return string(e.prefix) + e.err.Error() }
func (e *prefixedError) Unwrap() error { return e.err }
