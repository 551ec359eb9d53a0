//! TLS support (feature `tls`): rustls with the ring provider.

/// Installs ring as rustls's process-wide crypto provider, unless the
/// application installed one already.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
