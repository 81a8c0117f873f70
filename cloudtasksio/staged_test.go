package cloudtasksio

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAStagedDeadlineBeyondTheYear2262SaturatesInsteadOfExpiring(t *testing.T) {
	// A creation window that ends past what Unix nanoseconds can hold saturates instead of
	// wrapping into the past, which would expire every envelope.
	nearTheEnd := time.Unix(0, math.MaxInt64-int64(time.Hour))
	assert.Equal(t, int64(math.MaxInt64), envelopeDeadline(nearTheEnd, 2*time.Hour))
	assert.Equal(t, nearTheEnd.Add(30*time.Minute).UnixNano(), envelopeDeadline(nearTheEnd, 30*time.Minute))
}

func TestHugeStagedDurationsAreRejectedNotWrapped(t *testing.T) {
	for _, c := range []struct {
		o     StagedOptions
		field string
	}{
		// H - E - S computed naively wraps to a positive window far longer than H.
		{StagedOptions{NameRetention: time.Hour, ClockSkewAllowance: math.MaxInt64, RequestTimeout: math.MaxInt64}, "ClockSkewAllowance"},
		{StagedOptions{NameRetention: time.Hour, ClockSkewAllowance: math.MaxInt64 / 2, RequestTimeout: math.MaxInt64/2 + 2}, "ClockSkewAllowance"},
		{StagedOptions{NameRetention: time.Hour, RequestTimeout: math.MaxInt64}, "RequestTimeout"},
		{StagedOptions{NameRetention: 290 * 365 * 24 * time.Hour, RequestTimeout: time.Second}, "NameRetention"},
		{StagedOptions{NameRetention: 32 * 24 * time.Hour, RequestTimeout: time.Second}, "NameRetention"},
		{StagedOptions{NameRetention: 30 * 24 * time.Hour, ClockSkewAllowance: 25 * time.Hour, RequestTimeout: time.Second}, "ClockSkewAllowance"},
		{StagedOptions{NameRetention: 30 * 24 * time.Hour, RequestTimeout: 31 * time.Minute}, "RequestTimeout"},
	} {
		err := c.o.validate()
		require.Error(t, err, "%+v", c.o)
		assert.Contains(t, err.Error(), "StagedOptions."+c.field, "%+v", c.o)
		assert.LessOrEqual(t, c.o.creationWindow(), c.o.NameRetention, "the window never exceeds the retention: %+v", c.o)
	}
	assert.NoError(t, StagedOptions{NameRetention: 31 * 24 * time.Hour, ClockSkewAllowance: 24 * time.Hour, RequestTimeout: 30 * time.Minute}.validate(), "the bounds themselves are accepted")

	// The same bounds through the option keys, each error naming the key at fault.
	for key, value := range map[string]string{
		"sink.staged.clock-skew-allowance": "2562047h",
		"sink.staged.request-timeout":      "2562047h",
		"sink.staged.name-retention":       "2562047h",
	} {
		_, err := ConfigFromOptions(map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/",
			"sink.delivery-guarantee": "exactly-once", key: value})
		var oe *OptionError
		require.ErrorAs(t, err, &oe, key)
		assert.Equal(t, key, oe.Key)
		assert.Contains(t, oe.Reason, "at most")
	}
}

func TestStagedOptionsValidation(t *testing.T) {
	for _, c := range []struct {
		o    StagedOptions
		want string
	}{
		{StagedOptions{NameRetention: 0, RequestTimeout: time.Second}, "NameRetention"},
		{StagedOptions{NameRetention: time.Hour, RequestTimeout: -time.Second}, "RequestTimeout"},
		{StagedOptions{NameRetention: time.Hour, RequestTimeout: time.Second, ClockSkewAllowance: -1}, "ClockSkewAllowance"},
		{StagedOptions{NameRetention: 10 * time.Minute, RequestTimeout: 10 * time.Minute}, "less than 1ms"},
		{StagedOptions{NameRetention: 2 * time.Second, ClockSkewAllowance: time.Second, RequestTimeout: time.Second - time.Microsecond}, "less than 1ms"},
		{StagedOptions{NameRetention: time.Hour, RequestTimeout: time.Second, ExpiredEnvelopePolicy: 9}, "ExpiredEnvelopePolicy"},
	} {
		err := c.o.validate()
		require.Error(t, err, "%+v", c.o)
		assert.Contains(t, err.Error(), c.want)
	}
	assert.NoError(t, DefaultStagedOptions().validate())
	assert.NoError(t, StagedOptions{NameRetention: time.Minute, RequestTimeout: time.Second}.validate(), "zero clock skew is allowed")
}
