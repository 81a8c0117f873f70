package cloudtasksio

import (
	"reflect"
	"slices"
	"strings"
)

// This file is the target family table: a row per kind of declarative target, defined in the
// family's own file (http.go, appengine.go) and listed in targetFamilies.

// targetFamily is one row of the target family table: a kind of declarative target, the
// Config field that holds it and its option keys. Each family defines its row in its own file
// (http.go, appengine.go), as each body format does in internal/bodyformat. The rule that
// exactly one way to build the task is set, Config.target, the Go names of fields in errors,
// the target.type values, ConfigFromOptions' default target and every message that lists the
// families read the table, so a new family is a new file, one row here and one Config field.
type targetFamily struct {
	// name is the family's target.type value ("http").
	name string
	// field is the Config field of the family's target ("HTTP"), and goType the name of its
	// struct type ("HTTPTarget"): errors name a field below it as goType.<path>.
	field, goType string
	// get returns the family's target of c, nil when it is not set.
	get func(c Config) target
	// fill sets the family's target of c to the empty one that the option keys fill in.
	fill func(c *Config)
	// options are the family's option keys, in the order of docs/options.md; newFamily marks
	// them as the family's.
	options []optionRow
}

// newFamily builds the row of the family named name whose targets are *T, held in the Config
// field named field, which slot points at. empty is the target the option keys fill in.
func newFamily[T any, P interface {
	*T
	target
}](name, field string, slot func(*Config) *P, empty func() P, options []optionRow) targetFamily {
	rows := slices.Clone(options)
	for i := range rows {
		rows[i].family = name
	}
	return targetFamily{name: name, field: field, goType: reflect.TypeFor[T]().Name(), options: rows,
		get: func(c Config) target {
			if p := *slot(&c); p != nil {
				return p
			}
			return nil
		},
		fill: func(c *Config) { *slot(c) = empty() }}
}

// targetFamilies is the target family table; the first row is ConfigFromOptions' default.
var targetFamilies = []targetFamily{httpFamily, appEngineFamily}

// taskBuilderFields are the Config fields of which exactly one builds the task: a field per
// family, then Serializer.
func taskBuilderFields() []string {
	fields := make([]string, 0, len(targetFamilies)+1)
	for _, f := range targetFamilies {
		fields = append(fields, f.field)
	}
	return append(fields, "Serializer")
}

// taskBuilderList lists taskBuilderFields as a sentence does ("Config.HTTP, Config.AppEngine and
// Config.Serializer"), each field named by n.
func taskBuilderList(n namer) string {
	fields := taskBuilderFields()
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = n(f)
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
