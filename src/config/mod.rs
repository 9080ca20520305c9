//! Configuration: YAML in both layouts, the validation dictionary, and the normalised [`Settings`].

mod dictionary;
mod loader;
mod locate;
mod settings;
mod validate;

pub use dictionary::{Rule, ValidationDictionary, ValueType};
pub use loader::ConfigLoader;
pub use settings::{
    Channel, CoiotSettings, ComponentConfig, DefaultWebhooks, DeviceConfig, Layout, LogSettings,
    MqttSettings, Secret, Settings, WebhookSettings,
};
pub(crate) use validate::describe;
