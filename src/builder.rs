//! The one way to open a controller, used by the Rust API, the C ABI and `sdctl` alike: validation-dictionary
//! extensions, a model library, a wake flag and the `Files` logging block are set here, then settings are
//! loaded and the controller opened.

use std::path::Path;

use crate::config::{ConfigLoader, Settings, ValidationDictionary};
use crate::controller::Controller;
use crate::error::Result;
use crate::models::ModelLibrary;
use crate::wake::WakeFlag;

/// Opens a [`Controller`]: `Controller::builder().schema_file("extra.yaml")?.wake(flag).open_file("devices.yaml")`.
#[derive(Default)]
#[must_use = "a builder does nothing until one of its open methods is called"]
pub struct ControllerBuilder {
    dictionary: Option<ValidationDictionary>,
    models: Option<ModelLibrary>,
    wake: Option<WakeFlag>,
    files_logging: bool,
    finder: Option<Box<dyn crate::discovery::Finder>>,
}

impl ControllerBuilder {
    /// A builder with the built-in dictionary and model library, no wake flag, and the `Files` block ignored.
    pub fn new() -> Self {
        Self::default()
    }

    fn dictionary_mut(&mut self) -> &mut ValidationDictionary {
        self.dictionary
            .get_or_insert_with(ValidationDictionary::builtin)
    }

    /// Uses `dictionary` (for example the built-in one merged with your extensions) to validate settings.
    pub fn dictionary(mut self, dictionary: ValidationDictionary) -> Self {
        self.dictionary = Some(dictionary);
        self
    }

    /// Merges a validation-dictionary extension file (custom attributes) into the dictionary.
    pub fn schema_file(mut self, path: impl AsRef<Path>) -> Result<Self> {
        self.dictionary_mut().merge_file(path)?;
        Ok(self)
    }

    /// Merges a validation-dictionary extension given as YAML text; `source` names it in messages.
    pub fn schema_yaml(mut self, yaml: &str, source: &str) -> Result<Self> {
        let ext = ValidationDictionary::from_yaml_str(yaml, source)?;
        self.dictionary_mut().merge(&ext)?;
        Ok(self)
    }

    /// Uses `models` instead of the built-in model library.
    pub fn models(mut self, models: ModelLibrary) -> Self {
        self.models = Some(models);
        self
    }

    /// Uses the model library in `path` instead of the built-in one.
    pub fn models_file(self, path: impl AsRef<Path>) -> Result<Self> {
        Ok(self.models(ModelLibrary::from_file(path)?))
    }

    /// Sets `wake` whenever a webhook event is queued.
    pub fn wake(mut self, wake: WakeFlag) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Sets up logging from the settings' `Files` block at open (off by default: a Rust application usually
    /// owns its logger; `sdctl` and C programs without a log callback turn it on).
    pub fn files_logging(mut self, on: bool) -> Self {
        self.files_logging = on;
        self
    }

    fn loader(&self) -> ConfigLoader {
        let mut loader = ConfigLoader::new();
        if let Some(d) = &self.dictionary {
            loader = loader.with_dictionary(d.clone());
        }
        if let Some(m) = &self.models {
            loader = loader.with_models(m.clone());
        }
        loader
    }

    /// Loads and validates a configuration file with this builder's dictionary and models.
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<Settings> {
        self.loader().load_file(path)
    }

    /// Loads and validates configuration text with this builder's dictionary and models.
    pub fn load_yaml(&self, yaml: &str) -> Result<Settings> {
        self.loader().load_str(yaml)
    }

    /// Opens the installation `settings` describe (see [`Controller::open`] for what is checked).
    pub fn open(self, settings: Settings) -> Result<Controller> {
        if self.files_logging
            && let Some(files) = &settings.logging
        {
            crate::logging::init(files)?;
        }
        Controller::start(settings, self.wake, self.finder)
    }

    /// How devices configured with a `MAC` are looked up when they do not answer at their address (default:
    /// [`MdnsFinder`](crate::MdnsFinder), an mDNS browse). A lookup runs on the controller's `sd-find` thread,
    /// at most once a minute for every missing device at once; what it returns is a hint, checked by the
    /// device's own answer (its MAC) before the device moves.
    pub fn finder(mut self, finder: impl crate::discovery::Finder + 'static) -> Self {
        self.finder = Some(Box::new(finder));
        self
    }

    /// Loads `path` and opens it.
    pub fn open_file(self, path: impl AsRef<Path>) -> Result<Controller> {
        let settings = self.load_file(path)?;
        self.open(settings)
    }

    /// Loads YAML text and opens it.
    pub fn open_yaml(self, yaml: &str) -> Result<Controller> {
        let settings = self.load_yaml(yaml)?;
        self.open(settings)
    }
}

// The entry points to the builder live here, not in controller.rs: the builder opens a controller
// (`Controller::start`), so the controller must not need the builder (one-way dependency).
impl Controller {
    /// Checks the settings, starts one worker per device and the supervisor, and contacts every device once
    /// (all in parallel, one attempt each, so `open` takes at most about `ResponseTimeout`).
    ///
    /// Fails with [`Error::Init`](crate::Error::Init) listing every rule violation (component counts, unknown models, duplicate
    /// names or IDs, ...), or with [`Error::Simulation`](crate::Error::Simulation) when a simulation file is unreadable. A device that is
    /// unreachable does not make `open` fail: it is marked offline with its `LastError` and retried in the
    /// background. `wake` is set whenever a webhook event is queued.
    ///
    /// A shortcut for `Controller::builder()` with an optional wake flag, then [`ControllerBuilder::open`].
    pub fn open(settings: Settings, wake: Option<WakeFlag>) -> Result<Controller> {
        let builder = ControllerBuilder::new();
        match wake {
            Some(w) => builder.wake(w).open(settings),
            None => builder.open(settings),
        }
    }

    /// The one way to open a controller: dictionary extensions, model library, wake flag, logging; then load
    /// and open.
    pub fn builder() -> ControllerBuilder {
        ControllerBuilder::new()
    }
}
