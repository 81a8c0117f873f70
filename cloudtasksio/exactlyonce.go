package cloudtasksio

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// compileDelivery checks the delivery guarantee and the staged options.
func compileDelivery(cfg Config, spec *sinkSpec) error {
	switch cfg.Delivery {
	case AtLeastOnce:
		if cfg.Staged != nil {
			return errors.New("cloudtasksio: Config.Staged is set but Config.Delivery is not ExactlyOnce")
		}
		return nil
	case ExactlyOnce:
	default:
		return fmt.Errorf("cloudtasksio: Config.Delivery %d is not AtLeastOnce or ExactlyOnce", cfg.Delivery)
	}
	if cfg.QueueFn != nil {
		return errors.New("cloudtasksio: Config.Delivery ExactlyOnce requires a fixed Config.Queue, not Config.QueueFn")
	}
	if cfg.OnFailure != FailBundle {
		return errors.New("cloudtasksio: Config.Delivery ExactlyOnce requires Config.OnFailure FailBundle")
	}
	staged := DefaultStagedOptions()
	if cfg.Staged != nil {
		staged = *cfg.Staged
	}
	if err := staged.validate(); err != nil {
		return err
	}
	spec.Staged = staged
	return nil
}

// validate checks the staged options: retention and timeout positive, skew not negative, and
// a creation window H - E - S of at least one millisecond.
func (o StagedOptions) validate() error {
	switch {
	case o.NameRetention <= 0:
		return fmt.Errorf("cloudtasksio: StagedOptions.NameRetention %v must be positive", o.NameRetention)
	case o.RequestTimeout <= 0:
		return fmt.Errorf("cloudtasksio: StagedOptions.RequestTimeout %v must be positive", o.RequestTimeout)
	case o.ClockSkewAllowance < 0:
		return fmt.Errorf("cloudtasksio: StagedOptions.ClockSkewAllowance %v must not be negative", o.ClockSkewAllowance)
	case o.ExpiredEnvelopePolicy < ExpiredFail || o.ExpiredEnvelopePolicy > ExpiredDrop:
		return fmt.Errorf("cloudtasksio: StagedOptions.ExpiredEnvelopePolicy %d is not a known policy", o.ExpiredEnvelopePolicy)
	}
	if o.creationWindow() < time.Millisecond {
		return fmt.Errorf("cloudtasksio: StagedOptions: NameRetention %v - ClockSkewAllowance %v - RequestTimeout %v leaves less than 1ms to create a task",
			o.NameRetention, o.ClockSkewAllowance, o.RequestTimeout)
	}
	return nil
}

// creationWindow is H - E - S rounded down to whole milliseconds, or -1 when it is negative.
func (o StagedOptions) creationWindow() time.Duration {
	w := o.NameRetention - o.ClockSkewAllowance - o.RequestTimeout
	if w < 0 {
		return -1
	}
	return w.Truncate(time.Millisecond)
}

func writeExactlyOnce(s beam.Scope, spec *sinkSpec, elem reflect.Type, col beam.PCollection) (beam.PCollection, error) {
	return beam.PCollection{}, errors.New("cloudtasksio: ExactlyOnce is not available yet")
}
