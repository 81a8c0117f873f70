// Package xlang offers cloudtasksio.Write to pipelines of Beam's other SDKs (Python, Java,
// Beam YAML) through Beam's cross-language protocol: Service is the expansion service of the
// schema transform Identifier, and the program that serves it is also the Go worker that runs
// the expanded steps (cmd/cloudtasks-expansion-service).
package xlang
