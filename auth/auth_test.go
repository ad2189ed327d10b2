package auth

import "testing"

func TestRedactQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"":                      "",
		"t=0":                   "t=0",
		"token=abc.def":         "token=REDACTED",
		"t=0&token=abc&x=1":     "t=0&token=REDACTED&x=1",
		"tok%65n=abc":           "tok%65n=REDACTED",
		"tokens=3&mytoken=a":    "tokens=3&mytoken=a",
		"token=a&token=b":       "token=REDACTED&token=REDACTED",
		"qre=token&token=s3cr":  "qre=token&token=REDACTED",
		"token":                 "token=REDACTED",
		"token=%zz&t=1;token=x": "token=REDACTED&t=1;token=x",
	} {
		if got := RedactQuery(raw); got != want {
			t.Errorf("RedactQuery(%q) = %q, want %q", raw, got, want)
		}
	}
}
