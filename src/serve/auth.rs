//! Who may call: with a token, every call carries `authorization: Bearer <token>`, or basic
//! auth whose password is the token (what `Handshake` is called with: it answers with the
//! bearer, and ADBC and JDBC send that on every later call). Anything else is
//! `UNAUTHENTICATED`, before the service sees the call.

use base64::Engine;
use tonic::{Request, Status};

/// The check every call goes through.
pub(super) fn interceptor(
    token: Option<String>,
) -> impl Fn(Request<()>) -> std::result::Result<Request<()>, Status> + Clone + Send + Sync {
    move |request: Request<()>| match &token {
        None => Ok(request),
        Some(token) => {
            let header = request
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            check(header, token)?;
            Ok(request)
        }
    }
}

/// Whether an `authorization` header proves the token.
fn check(header: Option<&str>, token: &str) -> std::result::Result<(), Status> {
    let Some(header) = header else {
        return Err(Status::unauthenticated(
            "this server requires a token: send 'authorization: Bearer <token>', or basic \
             auth with the token as the password",
        ));
    };
    let presented = if let Some(bearer) = strip_scheme(header, "Bearer") {
        Some(bearer.trim().as_bytes().to_vec())
    } else if let Some(basic) = strip_scheme(header, "Basic") {
        basic_password(basic.trim())
    } else {
        None
    };
    match presented {
        Some(p) if same(&p, token.as_bytes()) => Ok(()),
        _ => Err(Status::unauthenticated("wrong token")),
    }
}

/// `header` after `scheme` and a space, the scheme's case ignored.
fn strip_scheme<'a>(header: &'a str, scheme: &str) -> Option<&'a str> {
    let (word, rest) = header.split_once(' ')?;
    word.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// The password of `user:password` in base64, with or without padding (ADBC's Go driver
/// writes none).
fn basic_password(encoded: &str) -> Option<Vec<u8>> {
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let decoded = engine.decode(encoded).ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some(decoded[colon + 1..].to_vec())
}

/// Compares in time that does not depend on where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-serve";

    fn basic(user_password: &str, pad: bool) -> String {
        let encoded = match pad {
            true => base64::engine::general_purpose::STANDARD.encode(user_password),
            false => base64::engine::general_purpose::STANDARD_NO_PAD.encode(user_password),
        };
        format!("Basic {encoded}")
    }

    #[test]
    fn a_call_proves_the_token_by_bearer_or_basic_auth() {
        assert!(check(Some(&format!("Bearer {TOKEN}")), TOKEN).is_ok());
        assert!(check(Some(&format!("bearer {TOKEN}")), TOKEN).is_ok());
        // ADBC's basic auth has no padding; any user name.
        let user_pass = format!("anyone:{TOKEN}");
        assert!(check(Some(&basic(&user_pass, false)), TOKEN).is_ok());
        assert!(check(Some(&basic(&user_pass, true)), TOKEN).is_ok());
        for wrong in [
            format!("Bearer {TOKEN}x"),
            "Bearer ".to_string(),
            basic("anyone:nope", true),
            basic(TOKEN, true),
            format!("Token {TOKEN}"),
            TOKEN.to_string(),
        ] {
            let err = check(Some(&wrong), TOKEN).unwrap_err();
            assert_eq!(err.code(), tonic::Code::Unauthenticated, "{wrong}");
        }
        let err = check(None, TOKEN).unwrap_err();
        assert!(err.message().contains("requires a token"), "{err}");
        assert!(interceptor(None)(Request::new(())).is_ok());
        assert!(interceptor(Some(TOKEN.into()))(Request::new(())).is_err());
    }
}
