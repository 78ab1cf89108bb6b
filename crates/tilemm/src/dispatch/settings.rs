//! The process's settings: read from the environment once ([`Settings::global`]), then
//! overridden field by field by each front end's own arguments (a CLI flag, a Python keyword, a
//! builder call). Nothing else in tilemm reads these variables.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::runtime::backend::Backend;
use crate::tune::TuneBudget;

/// Where products run, as `TILEMM_DEVICE`, `--device` and Python's `device=` name it:
/// `auto` (or empty), `cpu`, a backend (`cuda`, `hip`, `wgpu`: its best device) or a backend
/// and device index (`cuda:1`, `wgpu:0`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeviceSpec {
    /// The route the model expects to be fastest: the best GPU where the link and its speed
    /// pay, else the CPU path.
    #[default]
    Auto,
    /// tilemm's CPU path.
    Cpu,
    /// A GPU backend's device `index` (its best with `None`), CPU emulations included.
    Gpu {
        /// The backend.
        backend: Backend,
        /// The device within it (`tilemm devices`).
        index: Option<usize>,
    },
}

impl DeviceSpec {
    /// The spec for a backend and index as the CLI's `--backend` and `--device` give them.
    pub fn of(backend: Backend, index: Option<usize>) -> Result<DeviceSpec, String> {
        match (backend, index) {
            (Backend::Cpu, Some(_)) => Err("the CPU has no device index".into()),
            (Backend::Cpu, None) => Ok(DeviceSpec::Cpu),
            (backend, index) => Ok(DeviceSpec::Gpu { backend, index }),
        }
    }

    /// The backend and index asked for (`None` for `auto`; [`Backend::Cpu`] for the CPU).
    pub fn parts(self) -> (Option<Backend>, Option<usize>) {
        match self {
            DeviceSpec::Auto => (None, None),
            DeviceSpec::Cpu => (Some(Backend::Cpu), None),
            DeviceSpec::Gpu { backend, index } => (Some(backend), index),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() || text == "auto" {
            return Ok(DeviceSpec::Auto);
        }
        let (name, index) =
            match text.split_once(':') {
                Some((name, index)) => (
                    name,
                    Some(index.parse::<usize>().map_err(|_| {
                        format!("device index {index:?} is not a non-negative number")
                    })?),
                ),
                None => (text, None),
            };
        let backend = name.parse::<Backend>().map_err(|_| {
            format!("unknown device {text:?} (auto, cpu, cuda, hip or wgpu, with :INDEX for one device)")
        })?;
        DeviceSpec::of(backend, index)
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Gpu {
                backend,
                index: None,
            } => write!(f, "{backend}"),
            DeviceSpec::Gpu {
                backend,
                index: Some(i),
            } => write!(f, "{backend}:{i}"),
        }
    }
}

/// `TILEMM_BLAS`: which route the drop-in BLAS's calls take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlasRoute {
    /// The fastest by the measured model.
    #[default]
    Auto,
    /// tilemm's kernels on the GPU (on a failure, the CPU for that call).
    Gpu,
    /// tilemm's CPU path.
    Cpu,
    /// The BLAS underneath, as if tilemm were not there.
    Off,
}

impl FromStr for BlasRoute {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "" | "auto" => Ok(BlasRoute::Auto),
            "gpu" => Ok(BlasRoute::Gpu),
            "cpu" => Ok(BlasRoute::Cpu),
            "off" => Ok(BlasRoute::Off),
            _ => Err("not auto, gpu, cpu or off; every call goes to the BLAS underneath".into()),
        }
    }
}

/// What the environment asks of every front end.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `TILEMM_DEVICE`: where products run unless a front end names a device.
    pub device: DeviceSpec,
    /// `TILEMM_TUNE_BUDGET`: how long a call may search for a kernel for a shape class the
    /// cache does not hold as fully tuned. [`TuneBudget::None`] by default: no call waits on a
    /// search (see [`crate::dispatch::choose`]).
    pub tune_budget: TuneBudget,
    /// `TILEMM_BLAS`: the drop-in BLAS's route ([`BlasRoute::Off`] where the variable is
    /// unusable: a misspelt setting must not send a program's products somewhere unasked).
    pub blas_route: BlasRoute,
    /// `TILEMM_BLAS_LOG`: the file the drop-in BLAS appends one line per call to.
    pub blas_log: Option<std::path::PathBuf>,
    /// Each variable that is set but could not be used: a front end that can report errors
    /// refuses to run with one ([`Settings::usable`]); the BLAS, which cannot, says so on
    /// stderr and uses the default.
    pub unusable: Vec<Unusable>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            device: DeviceSpec::Auto,
            tune_budget: TuneBudget::None,
            blas_route: BlasRoute::Auto,
            blas_log: None,
            unusable: Vec::new(),
        }
    }
}

/// Variable `name`'s value in `vars`, or `None` where it is unset, empty or unusable (noted).
fn parsed<T: FromStr<Err = String>>(
    vars: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    unusable: &mut Vec<Unusable>,
) -> Option<T> {
    let value = vars(name).filter(|v| !v.trim().is_empty())?;
    match value.parse() {
        Ok(parsed) => Some(parsed),
        Err(reason) => {
            unusable.push(Unusable {
                name,
                value,
                reason,
            });
            None
        }
    }
}

/// A variable that is set to something tilemm cannot use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unusable {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// Why it cannot be used.
    pub reason: String,
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}: {}", self.name, self.value, self.reason)
    }
}

/// `TILEMM_DEVICE`, the variable that names the device.
pub const DEVICE_VARIABLE: &str = "TILEMM_DEVICE";
/// `TILEMM_TUNE_BUDGET`, the variable that names the tuning budget.
pub const TUNE_BUDGET_VARIABLE: &str = "TILEMM_TUNE_BUDGET";
/// `TILEMM_BLAS`, the variable that forces the drop-in BLAS's route.
pub const BLAS_ROUTE_VARIABLE: &str = "TILEMM_BLAS";
/// `TILEMM_BLAS_LOG`, the variable that names the drop-in BLAS's log.
pub const BLAS_LOG_VARIABLE: &str = "TILEMM_BLAS_LOG";

impl Settings {
    /// The settings of `vars` (name, value): [`Settings::from_env`] on the process's
    /// environment, or any other (tests).
    pub fn from_vars<'a>(vars: impl Fn(&str) -> Option<String> + 'a) -> Settings {
        let mut unusable = Vec::new();
        let mut settings = Settings::default();
        if let Some(device) = parsed(&vars, DEVICE_VARIABLE, &mut unusable) {
            settings.device = device;
        }
        if let Some(budget) = parsed(&vars, TUNE_BUDGET_VARIABLE, &mut unusable) {
            settings.tune_budget = budget;
        }
        let routes = unusable.len();
        settings.blas_route = parsed(&vars, BLAS_ROUTE_VARIABLE, &mut unusable).unwrap_or(
            if unusable.len() > routes {
                BlasRoute::Off
            } else {
                BlasRoute::Auto
            },
        );
        settings.blas_log = vars(BLAS_LOG_VARIABLE)
            .filter(|v| !v.is_empty())
            .map(Into::into);
        settings.unusable = unusable;
        settings
    }

    /// The process environment's settings, read now.
    pub fn from_env() -> Settings {
        Settings::from_vars(|name| std::env::var(name).ok())
    }

    /// The process environment's settings, read by the first caller and kept.
    pub fn global() -> &'static Settings {
        static GLOBAL: OnceLock<Settings> = OnceLock::new();
        GLOBAL.get_or_init(Settings::from_env)
    }

    /// These settings, or the first variable that could not be used, as an error (the BLAS's
    /// own variables aside: only the BLAS reads them).
    pub fn usable(&self) -> crate::Result<&Settings> {
        let bad = self.unusable.iter().find(|u| u.name != BLAS_ROUTE_VARIABLE);
        match bad {
            None => Ok(self),
            Some(bad) => Err(crate::Error::Setting {
                name: bad.name.into(),
                value: bad.value.clone(),
                reason: bad.reason.clone(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_specs_read_as_every_front_end_writes_them() {
        let read = |s: &str| s.parse::<DeviceSpec>();
        assert_eq!(read(""), Ok(DeviceSpec::Auto));
        assert_eq!(read("auto"), Ok(DeviceSpec::Auto));
        assert_eq!(read("cpu"), Ok(DeviceSpec::Cpu));
        assert_eq!(
            read(" cuda:1 "),
            Ok(DeviceSpec::Gpu {
                backend: Backend::Cuda,
                index: Some(1)
            })
        );
        assert_eq!(
            read("wgpu"),
            Ok(DeviceSpec::Gpu {
                backend: Backend::Wgpu,
                index: None
            })
        );
        for bad in ["tpu", "cuda:x", "cuda:-1", "cpu:0", "wgpu:"] {
            assert!(read(bad).is_err(), "{bad} was accepted");
        }
        for text in ["auto", "cpu", "hip", "wgpu:0", "cuda:3"] {
            assert_eq!(read(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn settings_come_from_the_variables_and_say_what_they_could_not_use() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let none = Settings::from_vars(vars(&[]));
        assert_eq!(none.device, DeviceSpec::Auto);
        assert_eq!(none.tune_budget, TuneBudget::None);
        assert!(none.usable().is_ok());
        let set = Settings::from_vars(vars(&[
            ("TILEMM_DEVICE", "cpu"),
            ("TILEMM_TUNE_BUDGET", "full"),
        ]));
        assert_eq!(set.device, DeviceSpec::Cpu);
        assert_eq!(set.tune_budget, TuneBudget::Full);
        assert_eq!(set.blas_route, BlasRoute::Auto);
        let blas = Settings::from_vars(vars(&[("TILEMM_BLAS", "cpu"), ("TILEMM_BLAS_LOG", "x")]));
        assert_eq!(blas.blas_route, BlasRoute::Cpu);
        assert_eq!(blas.blas_log.as_deref(), Some(std::path::Path::new("x")));
        let misspelt = Settings::from_vars(vars(&[("TILEMM_BLAS", "gpus")]));
        assert_eq!(misspelt.blas_route, BlasRoute::Off);
        assert_eq!(misspelt.unusable[0].name, "TILEMM_BLAS");
        let bad = Settings::from_vars(vars(&[
            ("TILEMM_DEVICE", "tpu"),
            ("TILEMM_TUNE_BUDGET", "x"),
        ]));
        assert_eq!(bad.device, DeviceSpec::Auto);
        assert_eq!(bad.unusable.len(), 2);
        let refused = bad.usable().unwrap_err().to_string();
        assert!(
            refused.contains("TILEMM_DEVICE") && refused.contains("tpu"),
            "{refused}"
        );
    }
}
