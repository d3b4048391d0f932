//! Plugins: `plugin.yaml` and VCP manifests, discovery, permissions, config options and the
//! tools they bring.
