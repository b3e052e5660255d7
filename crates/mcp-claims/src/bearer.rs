//! Extracting the token from `Authorization: Bearer <token>` (RFC 6750 §2.1).

use http::{HeaderMap, header};

use crate::error::AuthError;

/// The bearer token of a request. The scheme is matched case-insensitively; surrounding whitespace
/// is ignored. Exactly one `Authorization` header is accepted.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthError::MissingCredentials)?;
    if values.next().is_some() {
        return Err(AuthError::MultipleCredentials);
    }
    let value = value
        .to_str()
        .map_err(|_| AuthError::Malformed("authorization header is not visible ASCII"))?
        .trim();
    let (scheme, token) = value.split_once([' ', '\t']).unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::InvalidScheme);
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(AuthError::Malformed("empty bearer token"));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(values: &[&[u8]]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(
                header::AUTHORIZATION,
                HeaderValue::from_bytes(v).expect("header value"),
            );
        }
        headers
    }

    #[test]
    fn extracts_tokens() {
        assert_eq!(bearer_token(&with(&[b"Bearer abc"])), Ok("abc"));
        assert_eq!(bearer_token(&with(&[b"bearer abc"])), Ok("abc"));
        assert_eq!(bearer_token(&with(&[b"BEARER   abc  "])), Ok("abc"));
        assert_eq!(bearer_token(&with(&[b"Bearer\tabc"])), Ok("abc"));
    }

    #[test]
    fn refuses_the_rest() {
        assert_eq!(bearer_token(&with(&[])), Err(AuthError::MissingCredentials));
        assert_eq!(
            bearer_token(&with(&[b"Basic YTpi"])),
            Err(AuthError::InvalidScheme)
        );
        assert_eq!(
            bearer_token(&with(&[b"Bearerabc"])),
            Err(AuthError::InvalidScheme)
        );
        assert!(matches!(
            bearer_token(&with(&[b"Bearer \xff"])),
            Err(AuthError::Malformed(_))
        ));
        assert!(matches!(
            bearer_token(&with(&[b"Bearer "])),
            Err(AuthError::Malformed(_))
        ));
        assert!(matches!(
            bearer_token(&with(&[b"Bearer"])),
            Err(AuthError::Malformed(_))
        ));
        assert_eq!(
            bearer_token(&with(&[b"Bearer a", b"Bearer b"])),
            Err(AuthError::MultipleCredentials)
        );
    }
}
