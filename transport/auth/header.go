package auth

import (
	"fmt"
	"regexp"
	"strings"
)

// b64token is RFC 6750's token68: the bearer credential's characters.
var b64token = regexp.MustCompile(`^[A-Za-z0-9._~+/-]+=*$`)

// MaxSecretBytes bounds a presented secret.
const MaxSecretBytes = 256

// ParseAuthorization returns the secret of an "Authorization: Bearer
// SECRET" header value (the scheme case-insensitive, RFC 6750). Errors say
// what was wrong and never repeat the credential.
func ParseAuthorization(value string) (string, error) {
	if value == "" {
		return "", fmt.Errorf("%w: no Authorization header: allowed: Bearer TOKEN", ErrInvalid)
	}
	scheme, cred, ok := strings.Cut(value, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: Authorization scheme is not Bearer: allowed: Bearer TOKEN", ErrInvalid)
	}
	switch {
	case cred == "":
		return "", fmt.Errorf("%w: Authorization Bearer without a token: allowed: Bearer TOKEN", ErrInvalid)
	case len(cred) > MaxSecretBytes:
		return "", fmt.Errorf("%w: Authorization token of %d bytes: allowed: at most %d", ErrInvalid, len(cred), MaxSecretBytes)
	case strings.HasPrefix(cred, "sha256:"):
		return "", fmt.Errorf("%w: Authorization token is a token file's hash (sha256:...): allowed: the secret (%s...) that \"permitd tokens create\" printed", ErrInvalid, secretPrefix)
	case !b64token.MatchString(cred):
		return "", fmt.Errorf("%w: Authorization token has characters outside A-Z a-z 0-9 . _ ~ + / - (and trailing =), or spaces: allowed: the secret (%s...) that \"permitd tokens create\" printed", ErrInvalid, secretPrefix)
	}
	return cred, nil
}
