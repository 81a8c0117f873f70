package bodyformat

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everyKey carries every metadata key plus body fields of each naming kind.
type everyKey struct {
	OrderID  string            `json:"order_id"`
	Target   string            `cloudtasks:"url"`
	URI      string            `cloudtasks:"relative-uri"`
	Method   string            `cloudtasks:"http-method"`
	Headers  map[string]string `cloudtasks:"headers"`
	Service  *string           `cloudtasks:"app-engine-service"`
	Version  *string           `cloudtasks:"app-engine-version"`
	Instance *string           `cloudtasks:"app-engine-instance"`
	When     time.Time         `cloudtasks:"schedule-time" json:"when"`
	Deadline time.Duration     `cloudtasks:"dispatch-deadline"`
	Key      string            `cloudtasks:"task-id"`
	Amount   float64
	Secret   string `json:"-"`
	internal string
}

func schemaOf[T any](t *testing.T) *Schema {
	t.Helper()
	s, err := NewSchema(reflect.TypeFor[T]())
	require.NoError(t, err)
	return s
}

func TestSchemaSplitsBodyFromMetadata(t *testing.T) {
	s := schemaOf[everyKey](t)
	var names, goNames []string
	for _, f := range s.BodyFields() {
		names = append(names, f.Name)
		goNames = append(goNames, f.GoName)
	}
	assert.Equal(t, []string{"order_id", "Amount"}, names)
	assert.Equal(t, []string{"OrderID", "Amount"}, goNames)
	assert.Equal(t, Keys(), s.MetadataKeys())
	for _, k := range Keys() {
		assert.True(t, s.Has(k), k)
	}
	assert.Equal(t, reflect.TypeFor[everyKey](), s.Type())
	_ = everyKey{}.internal
}

func TestMetadataReadsEveryKey(t *testing.T) {
	s := schemaOf[everyKey](t)
	service, version, instance := "worker", "v2", ""
	when := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	elem := everyKey{
		Target: "https://example.com/x", URI: "/tasks/x", Method: "put",
		Headers: map[string]string{"X-Trace": "t1"},
		Service: &service, Version: &version, Instance: &instance,
		When: when, Deadline: 90 * time.Second, Key: "order-42",
	}
	md, err := s.Metadata(elem)
	require.NoError(t, err)
	assert.Equal(t, Metadata{
		URL: "https://example.com/x", RelativeURI: "/tasks/x", Method: "put",
		Headers: map[string]string{"X-Trace": "t1"},
		Service: &service, Version: &version, Instance: &instance,
		ScheduleTime: when, DispatchDeadline: 90 * time.Second, TaskID: "order-42", HasTaskID: true,
	}, md)

	// A pointer to the element is read the same way.
	md2, err := s.Metadata(&elem)
	require.NoError(t, err)
	assert.Equal(t, md, md2)

	// Unset fields stay unset.
	md, err = s.Metadata(everyKey{})
	require.NoError(t, err)
	assert.Equal(t, Metadata{HasTaskID: true}, md)
}

func TestMetadataConvertsNamedTypes(t *testing.T) {
	type header map[string]string
	type route string
	type elem struct {
		H header `cloudtasks:"headers"`
		S *route `cloudtasks:"app-engine-service"`
		U route  `cloudtasks:"url"`
	}
	s := schemaOf[elem](t)
	r := route("svc")
	md, err := s.Metadata(elem{H: header{"A": "b"}, S: &r, U: "https://x.test"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"A": "b"}, md.Headers)
	require.NotNil(t, md.Service)
	assert.Equal(t, "svc", *md.Service)
	assert.Equal(t, "https://x.test", md.URL)
	assert.False(t, md.HasTaskID)
}

func TestMetadataRejectsOtherElementTypes(t *testing.T) {
	s := schemaOf[everyKey](t)
	_, err := s.Metadata("not an order")
	assert.ErrorContains(t, err, "element has type string, want bodyformat.everyKey")
	_, err = s.Metadata((*everyKey)(nil))
	assert.ErrorContains(t, err, "nil *bodyformat.everyKey")
	_, err = s.Metadata(nil)
	assert.ErrorContains(t, err, "element is nil")
}

func TestSchemaOfPointerTypeAcceptsPointerAndValue(t *testing.T) {
	s, err := NewSchema(reflect.TypeFor[*everyKey]())
	require.NoError(t, err)
	assert.Equal(t, reflect.TypeFor[*everyKey](), s.Type())
	md, err := s.Metadata(&everyKey{Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, "k", md.TaskID)
	md, err = s.Metadata(everyKey{Key: "v"})
	require.NoError(t, err)
	assert.Equal(t, "v", md.TaskID)
}

func TestSchemaOfPlainTypes(t *testing.T) {
	type text string
	for _, typ := range []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[[]byte](), reflect.TypeFor[text]()} {
		s, err := NewSchema(typ)
		require.NoError(t, err, typ)
		require.Len(t, s.BodyFields(), 1)
		assert.Equal(t, -1, s.BodyFields()[0].Index)
		assert.Empty(t, s.MetadataKeys())
		md, err := s.Metadata(reflect.Zero(typ).Interface())
		require.NoError(t, err)
		assert.Equal(t, Metadata{}, md)
	}
}

func TestNewSchemaRejections(t *testing.T) {
	cases := []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"unknown key", reflect.TypeFor[struct {
			A string `cloudtasks:"uri"`
		}](), `field A (cloudtasks:"uri")`},
		{"empty key", reflect.TypeFor[struct {
			A string `cloudtasks:""`
		}](), "unknown metadata key"},
		{"url not string", reflect.TypeFor[struct {
			U []byte `cloudtasks:"url"`
		}](), `field U (cloudtasks:"url") of struct { U []uint8 "cloudtasks:\"url\"" }: has Go type []uint8, want string`},
		{"relative-uri not string", reflect.TypeFor[struct {
			U int `cloudtasks:"relative-uri"`
		}](), "want string"},
		{"method not string", reflect.TypeFor[struct {
			M *string `cloudtasks:"http-method"`
		}](), "want string"},
		{"task-id not string", reflect.TypeFor[struct {
			K int64 `cloudtasks:"task-id"`
		}](), `field K (cloudtasks:"task-id")`},
		{"headers not a string map", reflect.TypeFor[struct {
			H map[string][]string `cloudtasks:"headers"`
		}](), "want map[string]string"},
		{"service not a pointer", reflect.TypeFor[struct {
			S string `cloudtasks:"app-engine-service"`
		}](), "want *string"},
		{"version not a pointer", reflect.TypeFor[struct {
			S string `cloudtasks:"app-engine-version"`
		}](), "want *string"},
		{"instance not a pointer", reflect.TypeFor[struct {
			S string `cloudtasks:"app-engine-instance"`
		}](), "want *string"},
		{"schedule-time not time.Time", reflect.TypeFor[struct {
			T int64 `cloudtasks:"schedule-time"`
		}](), "want time.Time"},
		{"schedule-time pointer", reflect.TypeFor[struct {
			T *time.Time `cloudtasks:"schedule-time"`
		}](), "want time.Time"},
		{"dispatch-deadline not time.Duration", reflect.TypeFor[struct {
			D int64 `cloudtasks:"dispatch-deadline"`
		}](), "has Go type int64, want time.Duration"},
		{"dispatch-deadline pointer", reflect.TypeFor[struct {
			D *time.Duration `cloudtasks:"dispatch-deadline"`
		}](), "want time.Duration"},
		{"duplicate key", reflect.TypeFor[struct {
			A string `cloudtasks:"url"`
			B string `cloudtasks:"url"`
		}](), `field B (cloudtasks:"url")`},
		{"tagged unexported", reflect.TypeFor[struct {
			a string `cloudtasks:"url"`
		}](), "must be exported"},
		{"duplicate body name", reflect.StructOf([]reflect.StructField{
			{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"x"`},
			{Name: "B", Type: reflect.TypeFor[string](), Tag: `json:"x,omitempty"`},
		}), `fields A and B`},
		{"body name equal to another Go name", reflect.TypeFor[struct {
			A string
			B string `json:"A"`
		}](), `fields A and B`},
		{"embedded struct", reflect.TypeFor[struct {
			Inner
		}](), "embedded field Inner"},
		// encoding/json would promote x, so ignoring the field as unexported would drop it.
		{"unexported embedded struct", reflect.TypeFor[struct {
			inner
			A string
		}](), "embedded field inner"},
		{"unexported embedded struct pointer", reflect.TypeFor[struct {
			*inner
		}](), "embedded field inner"},
		{"int element", reflect.TypeFor[int](), "want a struct"},
		{"pointer to string", reflect.TypeFor[*string](), "must not be a pointer"},
		{"map element", reflect.TypeFor[map[string]string](), "want a struct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewSchema(c.typ)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := NewSchema(nil)
	assert.Error(t, err)
}

// Inner is embedded by a test type.
type Inner struct{ X string }

// inner is an unexported struct type embedded by test types.
type inner struct{ X string }

func TestSchemaIgnoresEmbeddedFieldsJSONIgnores(t *testing.T) {
	type id string
	type elem struct {
		inner `json:"-"`
		id           // an unexported non-struct: encoding/json ignores it too
		A     string `json:"a"`
	}
	s := schemaOf[elem](t)
	require.Len(t, s.BodyFields(), 1)
	assert.Equal(t, "a", s.BodyFields()[0].Name)
	_ = elem{inner: inner{}, id: ""}
}

func TestCheckKeys(t *testing.T) {
	type httpOnly struct {
		Body string
		U    string `cloudtasks:"url"`
	}
	type appEngineOnly struct {
		Body string
		R    string  `cloudtasks:"relative-uri"`
		S    *string `cloudtasks:"app-engine-service"`
	}
	type shared struct {
		M string            `cloudtasks:"http-method"`
		H map[string]string `cloudtasks:"headers"`
		T time.Time         `cloudtasks:"schedule-time"`
		K string            `cloudtasks:"task-id"`
	}
	// The caller's rule: which keys its target accepts.
	common := []string{KeyHTTPMethod, KeyHeaders, KeyScheduleTime, KeyTaskID}
	httpKeys := append([]string{KeyURL}, common...)
	appEngineKeys := append([]string{KeyRelativeURI, KeyAppEngineService, KeyAppEngineVersion, KeyAppEngineInstance}, common...)
	assert.NoError(t, schemaOf[httpOnly](t).CheckKeys(httpKeys, "http targets"))
	assert.NoError(t, schemaOf[appEngineOnly](t).CheckKeys(appEngineKeys, "app-engine targets"))
	assert.NoError(t, schemaOf[shared](t).CheckKeys(httpKeys, "http targets"))
	assert.NoError(t, schemaOf[shared](t).CheckKeys(appEngineKeys, "app-engine targets"))

	err := schemaOf[httpOnly](t).CheckKeys(appEngineKeys, "app-engine targets")
	assert.ErrorContains(t, err, `field U (cloudtasks:"url")`)
	assert.ErrorContains(t, err, "app-engine targets")
	err = schemaOf[appEngineOnly](t).CheckKeys(httpKeys, "http targets")
	assert.ErrorContains(t, err, `field R (cloudtasks:"relative-uri")`)
	assert.ErrorContains(t, err, "http targets")
	assert.Error(t, schemaOf[shared](t).CheckKeys(nil, "this target"), "no key allowed")
	assert.NoError(t, schemaOf[everyKey](t).CheckKeys(Keys(), "any target"))
}
