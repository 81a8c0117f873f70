package kafkatemplate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// configure checks the options and returns the sink configuration and the record reader's.
// Each step checks one group of flags, in this order, and the first problem is the one
// reported: the JSON-object flags, the sink's option keys, the record format and its fields,
// the task body, the task names, the failure policy.
func configure(o Options) (cloudtasksio.Config, recordSpec, error) {
	if o.flagProblems != nil && len(*o.flagProblems) > 0 {
		return cloudtasksio.Config{}, recordSpec{}, errors.New((*o.flagProblems)[0])
	}
	cfg, err := cloudtasksio.ConfigFromOptions(o.Sink)
	if err != nil {
		return cfg, recordSpec{}, sinkError(err)
	}
	spec, err := readerSpec(o)
	if err != nil {
		return cfg, spec, err
	}
	spec.Destination = cfg.Queue.Path()
	if err := rawBody(&cfg, o.URLField, spec.JSON); err != nil {
		return cfg, spec, err
	}
	nameTasks(&cfg, o)
	if cfg.OnFailure, err = failurePolicy(o); err != nil {
		return cfg, spec, err
	}
	spec.OnFailure = cfg.OnFailure
	return cfg, spec, nil
}

// readerSpec checks --format and the flags that pick fields out of a record, and returns what
// the record reader reads (without its destination and failure policy).
func readerSpec(o Options) (recordSpec, error) {
	var spec recordSpec
	switch o.Format {
	case FormatRaw, "":
		for _, f := range []struct{ flag, value string }{
			{"--task_id_field", o.TaskIDField}, {"--url_field", o.URLField}, {"--schedule_time_field", o.ScheduleTimeField},
		} {
			if f.value != "" {
				return spec, fmt.Errorf("%s reads a field of JSON records: it needs --format json", f.flag)
			}
		}
	case FormatJSON:
		spec.JSON = true
	default:
		return spec, fmt.Errorf("--format %s is not accepted; accepted: raw, json", quote(o.Format))
	}
	spec.TaskIDField, spec.URLField, spec.ScheduleTimeField = o.TaskIDField, o.URLField, o.ScheduleTimeField
	if o.TaskIDFromKey && o.TaskIDField != "" {
		return spec, errors.New("--task_id_from_key and --task_id_field both name the task; give one")
	}
	spec.TaskIDFromKey = o.TaskIDFromKey
	return spec, nil
}

// rawBody makes the target send each record's value unchanged: it requires a task URL (from
// the sink or from urlField), accepts only the raw body format (setting it when left out),
// and with JSON records adds Content-Type application/json unless a Content-Type header is
// configured.
func rawBody(cfg *cloudtasksio.Config, urlField string, jsonRecords bool) error {
	var bodyFormat *formats.Format
	var headers *map[string]string
	if cfg.HTTP != nil {
		bodyFormat, headers = &cfg.HTTP.Body, &cfg.HTTP.Headers
		if cfg.HTTP.URL == "" && urlField == "" {
			return errors.New("no task URL: set --cloudtasks_http_url or --url_field")
		}
	} else {
		bodyFormat, headers = &cfg.AppEngine.Body, &cfg.AppEngine.Headers
	}
	switch bodyFormat.Name {
	case "":
		*bodyFormat = formats.Raw()
	case formats.NameRaw:
	default:
		return fmt.Errorf("option key format=%s: the template sends each record's value unchanged, so the sink format must be raw or left out (use --format json for JSON records)", bodyFormat.Name)
	}
	if jsonRecords && !hasHeader(*headers, "Content-Type") {
		h := map[string]string{"Content-Type": "application/json"}
		for k, v := range *headers {
			h[k] = v
		}
		*headers = h
	}
	return nil
}

func hasHeader(headers map[string]string, name string) bool {
	for k := range headers {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// nameTasks names each task after the key the record reader found, when --task_id_field or
// --task_id_from_key asks for one.
func nameTasks(cfg *cloudtasksio.Config, o Options) {
	if o.TaskIDField == "" && !o.TaskIDFromKey {
		return
	}
	if cfg.AppEngine != nil {
		cfg.TaskIDFn = appEngineRecordKey
	} else {
		cfg.TaskIDFn = httpRecordKey
	}
}

// failurePolicy checks --on_failure and the dead-letter flags and returns the sink's policy:
// dead-letter when a topic is given and --on_failure is left out, fail otherwise.
func failurePolicy(o Options) (cloudtasksio.FailurePolicy, error) {
	policy := o.OnFailure
	if policy == "" {
		policy = OnFailureFail
		if o.DeadLetterTopic != "" {
			policy = OnFailureDeadLetter
		}
	}
	var p cloudtasksio.FailurePolicy
	switch policy {
	case OnFailureFail:
		p = cloudtasksio.FailBundle
	case OnFailureLogAndDrop:
		p = cloudtasksio.LogAndDrop
	case OnFailureDeadLetter:
		p = cloudtasksio.DeadLetter
		if o.DeadLetterTopic == "" {
			return p, errors.New("--on_failure dead-letter needs --dead_letter_topic")
		}
	default:
		return p, fmt.Errorf("--on_failure %s is not accepted; accepted: fail, log-and-drop, dead-letter", quote(o.OnFailure))
	}
	if o.DeadLetterTopic != "" && p != cloudtasksio.DeadLetter {
		return p, fmt.Errorf("--dead_letter_topic is set but --on_failure is %s; use dead-letter or leave --on_failure out", policy)
	}
	if o.DeadLetterEmulatorEndpoint != "" && o.DeadLetterTopic == "" {
		return p, errors.New("--dead_letter_emulator_endpoint needs --dead_letter_topic")
	}
	return p, nil
}
