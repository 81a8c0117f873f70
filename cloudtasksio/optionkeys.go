package cloudtasksio

import "slices"

// OptionKeys returns every option key ConfigFromOptions accepts that is not a header entry or
// a format option, in the order of https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md. Header entries are the keys under
// OptionHeaderPrefixes; format options are "<format>.<option>", such as "csv.field-delimiter"
// (the Option constants of package formats). A template that gives each key a flag of its own
// can check with this list that it misses none.
func OptionKeys() []string { return slices.Clone(fixedOptionKeys) }

// OptionHeaderPrefixes returns the prefixes of the header families, "http.headers." and
// "app-engine.headers.": the rest of such a key is the header name.
func OptionHeaderPrefixes() []string {
	var prefixes []string
	for _, r := range familyOptionRows() {
		if r.prefix {
			prefixes = append(prefixes, r.key)
		}
	}
	return prefixes
}
