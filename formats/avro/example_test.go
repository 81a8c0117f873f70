package avro_test

import (
	"fmt"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats/avro"
)

// Format is formats.Avro; calling it keeps the import that registers the encoder in the
// program. The value goes into HTTPTarget.Body or AppEngineTarget.Body of package cloudtasksio.
func ExampleFormat() {
	body := avro.Format(`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`)
	fmt.Println(body.Name, body.Options[formats.OptionAvroSchema] != "")
	fmt.Println("Content-Type unless a header sets one:", avro.ContentType)
	// Output:
	// avro true
	// Content-Type unless a header sets one: avro/binary
}
