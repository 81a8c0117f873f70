package xlang

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// xlangFamilies are the target families the transform builds tasks for: plan.go takes App
// Engine when its Config field is set and HTTP otherwise.
var xlangFamilies = map[string]bool{"http": true, "app-engine": true}

// TestEveryTargetFamilyIsOneTheTransformKnows fails when cloudtasksio gains a target family (a
// target.type with option keys of its own) that plan.go does not build, so that a new family
// is taught here rather than written as an HTTP task.
func TestEveryTargetFamilyIsOneTheTransformKnows(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range cloudtasksio.OptionSpecs() {
		if s.TargetType == "" {
			continue
		}
		seen[s.TargetType] = true
		assert.True(t, xlangFamilies[s.TargetType], "target family %q (option %s) is not one plan.go builds tasks for", s.TargetType, s.Key)
	}
	assert.Equal(t, xlangFamilies, seen, "every family plan.go knows has option keys of its own")
}
