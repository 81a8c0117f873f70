package bodyformat_test

import (
	"fmt"
	"reflect"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

type Order struct {
	OrderID string            `json:"order_id"`
	Note    string            `json:"note"`
	Tags    []string          `json:"tags"`
	Trace   map[string]string `cloudtasks:"headers"`
	Due     time.Time         `cloudtasks:"schedule-time"`
	Key     string            `cloudtasks:"task-id"`
}

func ExampleNewEncoder() {
	schema, err := bodyformat.NewSchema(reflect.TypeFor[Order]())
	if err != nil {
		panic(err)
	}
	for _, f := range []formats.Format{formats.FormURLEncoded(), formats.JSON(), formats.CSV().With("field-delimiter", ";")} {
		enc, err := bodyformat.NewEncoder(f, schema)
		if err != nil {
			fmt.Println(f.Name, err)
			continue
		}
		body, _ := enc.Encode(Order{OrderID: "42", Note: "東京 + pickup", Tags: []string{"urgent", "gift"}, Key: "order-42"})
		fmt.Printf("%s %q: %s\n", f.Name, enc.ContentType(), body)
	}
	// Output:
	// form-urlencoded "application/x-www-form-urlencoded": order_id=42&note=%E6%9D%B1%E4%BA%AC+%2B+pickup&tags=urgent&tags=gift
	// json "": {"order_id":"42","note":"東京 + pickup","tags":["urgent","gift"]}
	// csv formats: csv: field Tags (body name "tags") has Go type []string; the format accepts only scalar fields (strings, numbers, booleans, []byte, time.Time or other text marshalers) and pointers to them
}

func ExampleSchema_Metadata() {
	schema, err := bodyformat.NewSchema(reflect.TypeFor[Order]())
	if err != nil {
		panic(err)
	}
	fmt.Println(schema.CheckKeys([]string{bodyformat.KeyHeaders, bodyformat.KeyScheduleTime, bodyformat.KeyTaskID}, "this target"))
	md, _ := schema.Metadata(Order{Trace: map[string]string{"X-Trace-Id": "abc"}, Key: "order-42"})
	fmt.Println(md.Headers, md.TaskID, md.HasTaskID, md.ScheduleTime.IsZero())
	// Output:
	// <nil>
	// map[X-Trace-Id:abc] order-42 true true
}
