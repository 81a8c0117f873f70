// A Java pipeline that writes rows as Google Cloud Tasks through beam-cloudtasks' Go sink,
// expanded by cloudtasks-expansion-service (docs/xlang.md). It builds the pipeline, expands the
// transform and translates the pipeline to Beam's portable form, then prints what the
// translation holds; submit it to a portable runner (Flink, Dataflow) to run it.
//
// Run it from a classpath holding Beam Java (beam-sdks-java-core and its dependencies, for
// example those of beam-sdks-java-expansion-service) of a release the service serves:
//
//   java -cp 'lib/*' examples/xlang/java/WriteToCloudTasks.java 127.0.0.1:8097 [emulator host:port]

import java.io.ByteArrayOutputStream;
import java.util.Map;
import java.util.TreeMap;
import org.apache.beam.model.pipeline.v1.ExternalTransforms;
import org.apache.beam.model.pipeline.v1.RunnerApi;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.coders.RowCoder;
import org.apache.beam.sdk.schemas.Schema;
import org.apache.beam.sdk.schemas.SchemaTranslation;
import org.apache.beam.sdk.transforms.Create;
import org.apache.beam.sdk.util.construction.External;
import org.apache.beam.sdk.util.construction.PipelineTranslation;
import org.apache.beam.sdk.values.PCollection;
import org.apache.beam.sdk.values.Row;
import org.apache.beam.vendor.grpc.v1p69p0.com.google.protobuf.ByteString;

public class WriteToCloudTasks {
  static final String IDENTIFIER = "beam:schematransform:beam-cloudtasks:cloudtasks_write:v1";
  static final String SCHEMA_TRANSFORM = "beam:expansion:payload:schematransform:v1";

  public static void main(String[] args) throws Exception {
    String expansionService = args[0];
    String emulator = args.length > 1 ? args[1] : null;

    Schema orderSchema = Schema.builder().addStringField("id").addInt64Field("amount").build();
    Pipeline pipeline = Pipeline.create();
    PCollection<Row> orders =
        pipeline.apply(
            "Orders",
            Create.of(
                    Row.withSchema(orderSchema).addValues("order-0001", 12L).build(),
                    Row.withSchema(orderSchema).addValues("order-0002", 7L).build())
                .withRowSchema(orderSchema));

    // The configuration: the transform's fields, a row of its own schema.
    Schema.Builder fields =
        Schema.builder()
            .addStringField("project")
            .addStringField("location")
            .addStringField("queue")
            .addStringField("http_url")
            .addStringField("task_id_field")
            .addMapField("http_headers", Schema.FieldType.STRING, Schema.FieldType.STRING)
            .addMapField("error_handling", Schema.FieldType.STRING, Schema.FieldType.STRING);
    if (emulator != null) {
      fields.addStringField("emulator_endpoint");
    }
    Schema configSchema = fields.build();
    Row.Builder config =
        Row.withSchema(configSchema)
            .addValues("my-project", "europe-west1", "orders", "https://api.example.com/v1/orders", "id")
            .addValue(Map.of("X-Source", "java"))
            .addValue(Map.of("output", "errors"));
    if (emulator != null) {
      config.addValue(emulator);
    }
    ByteArrayOutputStream row = new ByteArrayOutputStream();
    RowCoder.of(configSchema).encode(config.build(), row);
    byte[] payload =
        ExternalTransforms.SchemaTransformPayload.newBuilder()
            .setIdentifier(IDENTIFIER)
            .setConfigurationSchema(SchemaTranslation.schemaToProto(configSchema, true))
            .setConfigurationRow(ByteString.copyFrom(row.toByteArray()))
            .build()
            .toByteArray();

    // The failed orders come back as rows of element, msg, stack, code and destination.
    PCollection<Row> errors =
        orders.apply(
            "WriteToCloudTasks",
            External.<PCollection<Row>, Row>of(SCHEMA_TRANSFORM, payload, expansionService));

    RunnerApi.Pipeline proto = PipelineTranslation.toProto(pipeline);
    summarize(proto, errors);
  }

  // summarize prints the expanded transform and every transform under it, with its URN and
  // environment, and each environment with its URN and staged files: what a runner gets.
  static void summarize(RunnerApi.Pipeline proto, PCollection<Row> errors) {
    RunnerApi.Components c = proto.getComponents();
    c.getTransformsMap().forEach((id, t) -> {
      if (t.getSpec().getUrn().equals(SCHEMA_TRANSFORM)) {
        print(c, id, "");
      }
    });
    new TreeMap<>(c.getEnvironmentsMap()).forEach((id, e) ->
        System.out.println("environment " + id + " urn=" + e.getUrn() + " dependencies=" + e.getDependenciesCount()));
    System.out.println("errors output: " + errors.getName() + " schema " + errors.getSchema().toString().replace('\n', ' '));
  }

  static void print(RunnerApi.Components c, String id, String indent) {
    RunnerApi.PTransform t = c.getTransformsOrThrow(id);
    System.out.println(indent + "transform " + t.getUniqueName() + " urn=" + t.getSpec().getUrn()
        + " environment=" + t.getEnvironmentId());
    for (String sub : t.getSubtransformsList()) {
      print(c, sub, indent + "  ");
    }
  }
}
