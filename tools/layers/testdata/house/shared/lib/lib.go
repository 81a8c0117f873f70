// Package lib imports nothing of the module.
package lib
