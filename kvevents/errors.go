package kvevents

import "fmt"

func errorf(format string, args ...any) error {
	return fmt.Errorf("kvevents: "+format, args...)
}
