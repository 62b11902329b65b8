package msg

import "testing"

// owner counts what it got back.
type owner struct{ released []any }

func (o *owner) Release(h any) { o.released = append(o.released, h) }

// A message carries what it was made with; one that views an owner's
// memory gives it back at Free, once, and Detach hands it on instead.
func TestMessagesAndOwners(t *testing.T) {
	m := New(1, 2, 3, 4, 5)
	if m.Kind() != 1 || m.Stream() != 2 || m.Flags() != 3 || m.Aux() != 4 || len(m.Payload()) != 5 || m.Handle() != nil {
		t.Fatalf("New: %d %d %d %d %d", m.Kind(), m.Stream(), m.Flags(), m.Aux(), len(m.Payload()))
	}
	n := New(9, 0, 0, 0, 0)
	m.SetNext(n)
	if m.Next() != n {
		t.Fatal("SetNext")
	}
	m.Free()
	n.Free()

	o := &owner{}
	v := View(1, 0, 0, 0, []byte("abc"), o, "h1")
	if string(v.Payload()) != "abc" || v.Handle() != "h1" {
		t.Fatalf("View: %q %v", v.Payload(), v.Handle())
	}
	v.Free()
	if len(o.released) != 1 || o.released[0] != "h1" {
		t.Fatalf("released %v, want [h1]", o.released)
	}
	d := View(1, 0, 0, 0, nil, o, "h2")
	if h := d.Detach(); h != "h2" || len(o.released) != 1 {
		t.Fatalf("Detach: %v, released %v", h, o.released)
	}
}
