package bodyformat

import "github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary"

// The package boundary. The errors of the body formats reach users through package
// cloudtasksio (and its cross-language wrapper) and name package formats, the one users
// configure: every error that leaves this package starts with pkgPrefix exactly once, and this
// file is the only place that writes it. The errors built inside the package, and those of the
// encoder packages it calls (formats/avro), carry no prefix; it is added where an error leaves:
//
//   - by NewSchema, Schema.Metadata, Schema.CheckKeys, Validate, NewEncoder and Encoder.Encode,
//     each of which returns its error through withPrefix;
//   - by OptionError.Error, for an *OptionError found with errors.As.
//
// The helpers that encoder packages call (Schema.Value, NestedFields, NewOptionError) and
// the encoders themselves (ElementEncoder, EncoderFactory, OptionParser) return errors
// without the prefix: those errors come back into this package, through NewEncoder or
// Encoder.Encode, and leave it once. A test (boundary_test.go) fails when a string literal
// starting with the prefix appears in any other file of this package or of formats/avro.

// pkgPrefix starts every error of the package.
const pkgPrefix boundary.Prefix = "formats: "

// withPrefix returns err with the package prefix, once (boundary.Prefix.Wrap): errors.Is and
// errors.As see through it. An *OptionError has the prefix already. A nil err stays nil.
func withPrefix(err error) error { return pkgPrefix.Wrap(err) }

// prefixText is text with the package prefix, for an exported error type's Error method.
func prefixText(text string) string { return pkgPrefix.Text(text) }
