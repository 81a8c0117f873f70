package deadletter

import "github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary"

// The package boundary. Every error of the package's own starts with pkgPrefix exactly once,
// and this file is the only place that writes it. The errors built inside the package carry
// no prefix; NewElementEncoder, ElementEncoder.Encode, EncodeElement, DecodeElement and
// DecodeElementAs return theirs through withPrefix.
//
// TryToPubSub is not a way out of this package's errors: it hands on those of package
// pubsubdl's output as they are (prefixed by pubsubdl's boundary), so that it answers as
// pubsubdl.TryToPubSub does and no error names two packages; its one error of its own, in a
// program that does not link pubsubdl, names deadletter.ToPubSub in place of the prefix. A
// test (boundary_test.go) fails when a string literal starting with the prefix appears in any
// other file.

// pkgPrefix starts every error of the package.
const pkgPrefix boundary.Prefix = "deadletter: "

// withPrefix returns err with the package prefix, once (boundary.Prefix.Wrap): errors.Is and
// errors.As see through it (ErrNoElement, ErrElementType). A nil err stays nil.
func withPrefix(err error) error { return pkgPrefix.Wrap(err) }
