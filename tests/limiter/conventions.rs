//! Every convention of DESIGN.md "Algorithms" on both backends: the memory
//! store and a private single Redis, driven by one manual clock.

#[path = "../cases/behaviour.rs"]
mod behaviour;

use redlimit_test_support::stores::BothStores;

#[tokio::test]
async fn remaining_counts_down_after_each_request() {
    let both = BothStores::start().await;
    behaviour::remaining_counts_down_after_each_request(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn a_denial_consumes_nothing() {
    let both = BothStores::start().await;
    behaviour::a_denial_consumes_nothing(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn retry_after_is_rounded_up_and_obeying_it_succeeds() {
    let both = BothStores::start().await;
    behaviour::retry_after_is_rounded_up_and_obeying_it_succeeds(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn a_cost_that_can_never_pass_is_denied_without_retry_after() {
    let both = BothStores::start().await;
    behaviour::a_cost_that_can_never_pass_is_denied_without_retry_after(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn cost_zero_takes_nothing_and_reports_the_state() {
    let both = BothStores::start().await;
    behaviour::cost_zero_takes_nothing_and_reports_the_state(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn peek_gives_the_check_answer_without_taking_it() {
    let both = BothStores::start().await;
    behaviour::peek_gives_the_check_answer_without_taking_it(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn windows_are_half_open() {
    let both = BothStores::start().await;
    behaviour::windows_are_half_open(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn rates_are_exact() {
    let both = BothStores::start().await;
    behaviour::rates_are_exact(&both.each(), &both.clock).await;
}

#[tokio::test]
async fn multi_strategy_is_all_or_nothing_and_names_every_violation() {
    let both = BothStores::start().await;
    behaviour::multi_strategy_is_all_or_nothing_and_names_every_violation(&both.each(), &both.clock).await;
}
