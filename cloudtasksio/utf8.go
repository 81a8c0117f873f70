package cloudtasksio

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Cloud Tasks takes only UTF-8 text in a task's string fields (its URL, relative URI, header
// names and values, routing, token scopes): the client refuses to encode anything else, so a
// task with an invalid byte sequence in one of them can never be sent. A Go string can hold
// any bytes, so the sink checks before sending and treats such a task as the element's
// failure, not the bundle's.

// invalidUTF8Field returns the path of a string field of m (the first the walk meets) that is
// not valid UTF-8, with "key" or "value" for a map entry's, or "" when every one is. The path
// never holds the text itself: a header value can be a credential.
func invalidUTF8Field(m protoreflect.Message) string {
	var bad string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		bad = invalidUTF8Value(fd, v)
		return bad == ""
	})
	return bad
}

func invalidUTF8Value(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	name := string(fd.Name())
	switch {
	case fd.IsMap():
		var bad string
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
				bad = "a key of " + name
			} else if in := invalidUTF8Single(fd.MapValue(), mv); in != "" {
				bad = "a value of " + name
				if in != "." {
					bad = "a value of " + name + "." + in
				}
			}
			return bad == ""
		})
		return bad
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			if in := invalidUTF8Single(fd, l.Get(i)); in != "" {
				return joinField(name, in)
			}
		}
		return ""
	}
	if in := invalidUTF8Single(fd, v); in != "" {
		return joinField(name, in)
	}
	return ""
}

// invalidUTF8Single checks one value of fd's kind: "." when it is a string that is not valid
// UTF-8, the path inside it for a message, "" when it is valid.
func invalidUTF8Single(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if !utf8.ValidString(v.String()) {
			return "."
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return invalidUTF8Field(v.Message())
	}
	return ""
}

func joinField(name, in string) string {
	if in == "." {
		return name
	}
	return name + "." + in
}

// replaceInvalidUTF8 replaces, in m, every invalid byte sequence of its string fields with
// U+FFFD, so that m can be encoded.
func replaceInvalidUTF8(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			mp := v.Map()
			type entry struct {
				k protoreflect.MapKey
				v protoreflect.Value
			}
			var entries []entry
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				entries = append(entries, entry{k, mv})
				return true
			})
			for _, e := range entries {
				k, mv := e.k, replaceInvalidUTF8Value(fd.MapValue(), e.v)
				if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
					mp.Clear(k)
					k = protoreflect.ValueOfString(strings.ToValidUTF8(k.String(), "\uFFFD")).MapKey()
				}
				mp.Set(k, mv)
			}
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				l.Set(i, replaceInvalidUTF8Value(fd, l.Get(i)))
			}
		default:
			if fd.Kind() == protoreflect.StringKind {
				m.Set(fd, replaceInvalidUTF8Value(fd, v))
			} else {
				replaceInvalidUTF8Value(fd, v)
			}
		}
		return true
	})
}

func replaceInvalidUTF8Value(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s := v.String(); !utf8.ValidString(s) {
			return protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD"))
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		replaceInvalidUTF8(v.Message())
	}
	return v
}
