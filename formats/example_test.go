package formats_test

import (
	"fmt"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// A Format is plain data: a name and options. It goes into HTTPTarget.Body or
// AppEngineTarget.Body of package cloudtasksio, which checks it against the element type when
// the pipeline is constructed.
func ExampleFormat() {
	for _, f := range []formats.Format{formats.JSON(), formats.FormURLEncoded(), {}} {
		fmt.Printf("%q no body: %t\n", f.Name, f.IsZero())
	}
	// Output:
	// "json" no body: false
	// "form-urlencoded" no body: false
	// "" no body: true
}

func ExampleCSV() {
	f := formats.CSV().
		With(formats.OptionCSVFieldDelimiter, ";").
		With(formats.OptionCSVNullLiteral, "NULL")
	fmt.Println(f.Name, f.Options)
	// Output: csv map[field-delimiter:; null-literal:NULL]
}

func ExampleAvro() {
	f := formats.Avro(`{"type":"record","name":"Order","fields":[{"name":"order_id","type":"string"}]}`)
	fmt.Println(f.Name, f.Options[formats.OptionAvroSchema] != "")
	// Output: avro true
}
