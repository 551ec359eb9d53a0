//! A validated policy as the constant expression a site is built with:
//! nothing is parsed at run time.

use proc_macro2::{Literal, TokenStream};
use quote::quote;
use redlimit_grammar::{AlgorithmKind, Strategy};

/// The policy as a constant expression: nothing is parsed at run time.
pub(crate) fn policy(spec: &redlimit_grammar::PolicySpec, p: &TokenStream) -> TokenStream {
    let strategies = || {
        let list = spec.strategies.iter().flatten().map(|&Strategy { limit, window_us, calendar }| {
            let (limit, window_us) = (Literal::u64_suffixed(limit), Literal::u64_suffixed(window_us));
            match calendar {
                // The zone as the bundled database spells it, checked here.
                Some(calendar) => {
                    let unit = quote::format_ident!("{}", format!("{:?}", calendar.unit));
                    let zone = calendar.zone;
                    quote!(#p::Strategy::per_calendar(#limit, #p::Calendar { unit: #p::CalendarUnit::#unit, zone: #zone }))
                }
                None => quote!(#p::Strategy::new(#limit, #window_us)),
            }
        });
        quote!(&[#(#list),*])
    };
    let rate = || {
        let rate = spec.rate.expect("validated: every algorithm with a rate requires it");
        let (count, period_us) = (Literal::u64_suffixed(rate.count), Literal::u64_suffixed(rate.period_us));
        quote!(#p::Rate { count: #count, period_us: #period_us })
    };
    let number = |n: Option<u64>| Literal::u64_suffixed(n.expect("validated, defaults applied"));
    match spec.kind {
        AlgorithmKind::FixedWindow => {
            let s = strategies();
            quote!(#p::Policy::__fixed_window(#s))
        }
        AlgorithmKind::SlidingWindow => {
            let (s, precision) = (strategies(), number(spec.precision));
            quote!(#p::Policy::__sliding_window(#s, #precision))
        }
        AlgorithmKind::SlidingLog => {
            let s = strategies();
            quote!(#p::Policy::__sliding_log(#s))
        }
        AlgorithmKind::TokenBucket => {
            let (capacity, rate) = (number(spec.capacity), rate());
            match spec.refill.unwrap_or_default() {
                redlimit_grammar::Refill::Interval => quote!(#p::Policy::__token_bucket_interval(#capacity, #rate)),
                redlimit_grammar::Refill::Continuous => quote!(#p::Policy::__token_bucket(#capacity, #rate)),
            }
        }
        AlgorithmKind::LeakyBucket => {
            let (capacity, rate) = (number(spec.capacity), rate());
            quote!(#p::Policy::__leaky_bucket(#capacity, #rate))
        }
        AlgorithmKind::Gcra => {
            let (rate, burst) = (rate(), number(spec.burst));
            quote!(#p::Policy::__gcra(#rate, #burst))
        }
        AlgorithmKind::Concurrency => {
            let limit = number(spec.limit);
            let lease = Literal::u64_suffixed(spec.lease.unwrap_or(redlimit_grammar::DEFAULT_LEASE_US));
            quote!(#p::Policy::__concurrency(#limit, #lease))
        }
    }
}
