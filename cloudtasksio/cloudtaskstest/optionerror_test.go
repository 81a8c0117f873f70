package cloudtaskstest_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// TestAnUnusableOptionIsAnOptionErrorNamingIt: a caller that builds options from its own
// settings (the emulator command from its flags) learns which option failed from the error's
// type, not from its text.
func TestAnUnusableOptionIsAnOptionErrorNamingIt(t *testing.T) {
	for want, opt := range map[string]cloudtaskstest.Option{
		"WithCreateQuota":  cloudtaskstest.WithCreateQuota("projects/p/queues/q", cloudtaskstest.CreateQuota{PerSecond: 1, Burst: 1}),
		"WithOIDCKeyFile":  cloudtaskstest.WithOIDCKeyFile(filepath.Join(t.TempDir(), "missing.pem")),
		"WithAppEngineURL": cloudtaskstest.WithAppEngineURL("not a url"),
	} {
		t.Run(want, func(t *testing.T) {
			srv, err := cloudtaskstest.NewServerWithAddress("127.0.0.1:0", opt)
			if srv != nil {
				srv.Close()
			}
			var oe *cloudtaskstest.OptionError
			require.True(t, errors.As(err, &oe), "%v", err)
			assert.Equal(t, want, oe.Option)
			assert.NotEmpty(t, oe.Error())
			assert.Same(t, oe.Err, errors.Unwrap(oe))
		})
	}
}
