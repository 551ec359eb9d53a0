#![cfg(feature = "redis")]
//! The process's switch (`set_dry_run`, `REDLIMIT_DRY_RUN`) is not a trial:
//! it lets the enforced policies' denials through on their own counts, so
//! switching it off enforces at once, from the counts of what passed while
//! it was on. Its own test binary: the switch is the whole process's.

use redlimit::{Limiter, Policy};
use redlimit_test_support::stores::BothStores;

#[tokio::test]
async fn switching_the_process_out_of_dry_run_continues_from_the_same_counts() {
    let both = BothStores::start().await;
    for (at, store) in both.each() {
        let limiter = Limiter::new("switched", Policy::fixed_window("3/1m").unwrap(), store);
        assert!(limiter.limit("ann", 1).await.is_ok(), "{at}");
        redlimit::set_dry_run(true);
        let mut would_deny = 0;
        for _ in 0..4 {
            would_deny += u32::from(!limiter.limit("ann", 1).await.expect("the process is in dry run").allowed);
        }
        assert_eq!(would_deny, 2, "{at}: the enforced count, one spent before the switch");
        redlimit::set_dry_run(false);
        assert!(limiter.limit("ann", 1).await.is_err(), "{at}: the three passed are counted");
        assert!(limiter.limit("bob", 1).await.is_ok(), "{at}");
    }
}
