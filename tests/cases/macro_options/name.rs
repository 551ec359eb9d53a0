//! `name`: the limiter's name; by default the module path and function name.
//! Two functions with one name (and one algorithm) share a limit.

use super::{denied, on_global_store};
use redlimit::{rate_limit, RateLimited};

#[rate_limit(algo = "sliding_log", strategies = "3/1h", key = "<user>", name = "name.shared")]
async fn read(user: u32) -> Result<&'static str, RateLimited> {
    Ok("read")
}

#[rate_limit(algo = "sliding_log", strategies = "3/1h", key = "<user>", name = "name.shared")]
async fn write(user: u32) -> Result<&'static str, RateLimited> {
    Ok("write")
}

#[test]
fn one_name_is_one_limit() {
    on_global_store(async {
        read(1).await.unwrap();
        write(1).await.unwrap();
        read(1).await.unwrap();
        let d = denied(write(1).await);
        assert_eq!(d.limiter(), "name.shared");
        assert!(denied(read(1).await).to_string().starts_with("rate limited by `name.shared`"));
        assert_eq!(write(2).await.unwrap(), "write", "another key of the shared limit");
    });
}

mod a {
    #[redlimit::rate_limit(algo = "fixed_window", strategies = "1/1h")]
    pub async fn same() -> Result<(), redlimit::RateLimited> {
        Ok(())
    }
}

mod b {
    #[redlimit::rate_limit(algo = "fixed_window", strategies = "1/1h")]
    pub async fn same() -> Result<(), redlimit::RateLimited> {
        Ok(())
    }
}

#[test]
fn the_default_is_module_path_and_function() {
    on_global_store(async {
        a::same().await.unwrap();
        b::same().await.unwrap();
        assert_eq!(denied(a::same().await).limiter(), concat!(module_path!(), "::a::same"));
        assert_eq!(denied(b::same().await).limiter(), concat!(module_path!(), "::b::same"));
    });
}

mod handlers {
    pub struct Cats;
    pub struct Dogs;

    impl Cats {
        #[redlimit::rate_limit(algo = "fixed_window", strategies = "2/1h")]
        pub async fn list(&self) -> Result<&'static str, redlimit::RateLimited> {
            Ok("cats")
        }
    }

    impl Dogs {
        #[redlimit::rate_limit(algo = "fixed_window", strategies = "2/1h")]
        pub async fn list(&self) -> Result<&'static str, redlimit::RateLimited> {
            Ok("dogs")
        }
    }
}

// Documented: the macro cannot see the impl's type, so both default to
// `<module>::handlers::list` and share one limit (the runtime logs a warning
// at the second one's first call). Distinct `name`s separate them.
#[test]
fn methods_of_two_types_in_one_module_share_the_default_name() {
    on_global_store(async {
        handlers::Cats.list().await.unwrap();
        handlers::Dogs.list().await.unwrap();
        let d = denied(handlers::Cats.list().await);
        assert_eq!(d.limiter(), concat!(module_path!(), "::handlers::list"));
    });
}

mod shown {
    #[redlimit::rate_limit(algo = "sliding_log", strategies = "1/1h")]
    pub async fn by_default() -> Result<(), redlimit::RateLimited> {
        Ok(())
    }

    #[redlimit::rate_limit(algo = "sliding_log", strategies = "1/1h", name = "shown.explicit")]
    pub async fn by_name() -> Result<(), redlimit::RateLimited> {
        Ok(())
    }
}

/// The 429 body a client reads, as text.
async fn body(denied: RateLimited) -> String {
    use axum::response::IntoResponse;
    let response = denied.into_response();
    assert_eq!(response.status(), 429);
    String::from_utf8(axum::body::to_bytes(response.into_body(), 4096).await.unwrap().to_vec()).unwrap()
}

// A client learns no module path: a default name stays in logs and keys only.
#[test]
fn the_http_body_names_only_a_name_given() {
    on_global_store(async {
        shown::by_default().await.unwrap();
        let denied_by_default = denied(shown::by_default().await);
        assert_eq!(denied_by_default.limiter(), concat!(module_path!(), "::shown::by_default"));
        assert!(denied_by_default.to_string().contains("::shown::by_default"), "Display (logs) keeps it");
        let text = body(denied_by_default).await;
        assert!(text.contains(r#""detail":"rate limited (1/1h exceeded); retry after 3600s""#), "{text}");
        assert!(!text.contains("shown") && !text.contains("::"), "{text}");

        shown::by_name().await.unwrap();
        let text = body(denied(shown::by_name().await)).await;
        assert!(
            text.contains(r#""detail":"rate limited by `shown.explicit` (1/1h exceeded); retry after 3600s""#),
            "{text}"
        );
    });
}
